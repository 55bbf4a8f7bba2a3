"""Staff change a batch's cap on text messages after it was made, on the batch page and over the API: never below
what was sent, audited, and the texts the old cap held back go out within one job when it is raised. On real
workers with a stand-in SMS gateway."""

from __future__ import annotations

from flask import g
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import Batch, Event, SigningRequest, utcnow
from bulksign.people.users import create_api_key, create_user
from tests.support.texting import create_batch
from tests.support.web import csrf_from

ROWS = "email,name,phone\n" + "".join(f",Person {i},+7999123456{i}\n" for i in range(3))


def _capped(client, users, gateway, run_jobs) -> int:
    """A batch of three phone-only rows whose cap of 2 held the third invitation back."""
    batch_id = create_batch(client, users, ROWS, channel="text_without_address", text_cap="2")
    run_jobs("pdf", "mail")
    assert len(gateway.received) == 2
    return batch_id


def _statuses(batch_id: int) -> list[str]:
    db.session.expire_all()
    return list(
        db.session.scalars(
            select(SigningRequest.status).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )


def _cap(batch_id: int) -> tuple[int | None, int]:
    db.session.expire_all()
    batch = db.session.get(Batch, batch_id)
    return batch.text_cap, batch.texts_sent


def _change(client, batch_id: int, value: str, *, csrf: bool = True):
    g.pop("_login_user", None)  # the test's app context is shared with the client: the workers ended its session
    page = client.get(f"/batches/{batch_id}")
    data = {"text_cap": value, **({"csrf_token": csrf_from(page)} if csrf else {})}
    return client.post(f"/batches/{batch_id}/text-cap", data=data, follow_redirects=True)


def test_staff_raise_the_cap_on_the_batch_page_and_the_held_text_goes_out_within_one_job(
    app, users, client, auth, smtp, gateway, run_jobs
):
    auth.login()
    staff_id = users["staff"].id
    batch_id = _capped(client, users, gateway, run_jobs)
    assert _statuses(batch_id) == ["sent", "sent", "failed"]
    g.pop("_login_user", None)
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert 'id="text-cap-form"' in page and 'name="text_cap" min="2" max="1000000" value="2"' in page
    lowered = _change(client, batch_id, "1").get_data(as_text=True)
    assert "2 text messages were sent already: the limit cannot be lower than that." in lowered
    for hostile in ("", "abc", "-1", "1e3", "2.5", "99999999", "１０", "3; DROP TABLE batches"):
        refused = _change(client, batch_id, hostile)
        assert refused.status_code == 200
        assert "The limit of text messages must be a whole number from 0 to 1,000,000." in refused.get_data(
            as_text=True
        )
    assert _change(client, batch_id, "5", csrf=False).status_code == 400
    assert _cap(batch_id) == (2, 2)
    assert db.session.scalar(select(Event.id).where(Event.type == "batch.text_cap")) is None
    raised = _change(client, batch_id, "5").get_data(as_text=True)
    assert "The batch may now send 5 text messages; 1 held back goes out now." in raised
    assert run_jobs("mail", max_jobs=1) == 1
    assert [t.to for t in gateway.received] == ["+79991234560", "+79991234561", "+79991234562"]
    assert _statuses(batch_id) == ["sent", "sent", "sent"]
    assert _cap(batch_id) == (5, 3)
    [event] = db.session.scalars(select(Event).where(Event.type == "batch.text_cap")).all()
    assert (event.batch_id, event.actor, event.details) == (batch_id, f"user:{staff_id}", {"from": 2, "to": 5})
    g.pop("_login_user", None)
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "3 of at most 5 text messages sent" in page and "text-cap-reached" not in page
    # Raised again: nothing is held back, nothing more goes.
    assert "The batch may now send 6 text messages." in _change(client, batch_id, "6").get_data(as_text=True)
    assert run_jobs("mail") == 0 and len(gateway.received) == 3


def test_only_who_may_act_on_the_batch_changes_its_cap(app, users, client, auth, gateway, run_jobs):
    batch_id = _capped(client, users, gateway, run_jobs)
    create_user(db.session, email="other@example.com", password="other-pass-123", role="staff", now=utcnow())
    db.session.commit()
    g.pop("_login_user", None)
    auth.login("other@example.com", "other-pass-123")
    # Without the form's CSRF token the post is refused before anything is looked up.
    assert (
        client.post(f"/batches/{batch_id}/text-cap", data={"text_cap": "9"}).status_code == 400
    )  # no CSRF token: refused before anything is read
    g.pop("_login_user", None)
    page = client.get("/")
    answer = client.post(f"/batches/{batch_id}/text-cap", data={"text_cap": "9", "csrf_token": csrf_from(page)})
    assert answer.status_code == 404
    assert _cap(batch_id) == (2, 2) and _statuses(batch_id) == ["sent", "sent", "failed"]


def test_the_api_changes_the_cap_and_refuses_what_it_cannot_be(app, users, client, gateway, run_jobs):
    key = create_api_key(db.session, user=users["staff"], name="cap", now=utcnow()).secret
    db.session.commit()
    mailed = create_batch(client, users, "email,name\na@example.com,A\n")
    batch_id = _capped(client, users, gateway, run_jobs)
    headers = {"Authorization": f"Bearer {key}"}

    def post(body):
        g.pop("_login_user", None)
        return client.post(f"/api/v1/batches/{batch_id}/text-cap", json=body, headers=headers)

    lowered = post({"text_cap": 1})
    assert (lowered.status_code, lowered.json["error"]["message"]) == (
        422,
        "2 text messages were sent already: the limit cannot be lower than that.",
    )
    for hostile in ({}, {"text_cap": "3"}, {"text_cap": True}, {"text_cap": -1}, {"text_cap": 10**12}, [3]):
        assert post(hostile).status_code == 400, hostile
    assert client.post(f"/api/v1/batches/{batch_id}/text-cap", json={"text_cap": 3}).status_code == 401
    assert post({"text_cap": 3}).json == {"batch_id": batch_id, "text_cap": 3, "released": 1}
    assert run_jobs("mail", max_jobs=1) == 1
    assert len(gateway.received) == 3 and _statuses(batch_id) == ["sent", "sent", "sent"]
    g.pop("_login_user", None)
    only_mails = client.post(f"/api/v1/batches/{mailed}/text-cap", json={"text_cap": 3}, headers=headers)
    assert (only_mails.status_code, only_mails.json["error"]["message"]) == (
        422,
        "This batch only mails: it sends no text messages.",
    )
    assert client.post("/api/v1/batches/999999999/text-cap", json={"text_cap": 3}, headers=headers).status_code == 404
