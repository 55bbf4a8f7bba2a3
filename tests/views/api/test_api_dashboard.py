"""The dashboard API: batches with counts, requests in keyset pages, never a token."""

from __future__ import annotations

import pytest

from bulksign.core.extensions import db
from bulksign.people.users import create_api_key
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW


@pytest.fixture
def api(client, users):
    secret = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {secret}"}

    def get(url):
        return client.get(url, headers=headers)

    return get


def test_batch_list_and_detail_with_counts(api):
    batch = batch_in_states(db.session, statuses=["sent", "signed", "signed"], now=NOW)
    listed = api("/api/v1/batches").get_json()
    assert listed["items"][0]["id"] == batch.id and listed["items"][0]["counts"]["signed"] == 2
    one = api(f"/api/v1/batches/{batch.id}").get_json()
    assert set(one) >= {"id", "name", "status", "total_count", "counts", "created_at", "deadline_at"}
    assert one["counts"]["signed"] == 2 and one["counts"]["sent"] == 1 and one["total_count"] == 3
    assert api("/api/v1/batches/999").status_code == 404


def test_requests_in_keyset_pages_with_filter_and_no_token(api):
    batch = batch_in_states(db.session, statuses=["sent"] * 7 + ["signed"], now=NOW)
    seen, cursor = [], ""
    for _ in range(10):
        body = api(f"/api/v1/batches/{batch.id}/requests?status=sent&limit=3&cursor={cursor}").get_json()
        seen += body["items"]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert len(seen) == 7 and {i["status"] for i in seen} == {"sent"}
    assert all("token" not in key for item in seen for key in item)
    assert api(f"/api/v1/batches/{batch.id}/requests?q=person000008").get_json()["items"][0]["status"] == "signed"


def test_bad_parameters_are_clear_400s_and_a_cursor_the_list_never_issued_a_422(api):
    batch = batch_in_states(db.session, statuses=["sent"], now=NOW)
    for query, status in (("status=nope", 400), ("cursor=!!!", 422), ("limit=0", 400), ("sort=token_hash", 400)):
        response = api(f"/api/v1/batches/{batch.id}/requests?{query}")
        assert response.status_code == status and response.get_json()["error"]["message"], query


def test_the_api_needs_a_key(client, users):
    assert client.get("/api/v1/batches").status_code == 401
