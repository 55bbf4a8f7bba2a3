"""Destructive staff and admin actions ask first (views/confirm.py): nothing happens until the question is answered."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import ApiKey, SigningRequest, Suppression, User, utcnow
from bulksign.people.access import share_batch
from bulksign.people.users import create_api_key
from bulksign.views.confirm import ASKS_FIRST
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.web import csrf_from


def _text(response) -> str:
    """The page's words without tags, spaces folded (what a person reads)."""
    return " ".join(re.sub(r"<[^>]+>", " ", response.get_data(as_text=True)).split())


def _fresh_request_state():
    """The test shares the client's app context: no cached user or locale from the request before."""
    from flask import g

    db.session.remove()
    g.pop("_login_user", None)
    g.pop("_flask_babel", None)  # Flask-Babel caches the locale on g


def _post(client, url, page="/admin/", **form):
    return client.post(url, data={"csrf_token": csrf_from(client.get(page)), **form})


def _confirm(client, url, page="/admin/", **form):
    return _post(client, url, page, confirmed="1", **form)


def test_every_asking_endpoint_exists(app):
    assert set(ASKS_FIRST) <= {rule.endpoint for rule in app.url_map.iter_rules()}


def test_a_password_reset_asks_first_says_what_happens_and_only_the_confirmed_form_resets(client, auth, users):
    before = users["staff"].password_hash
    auth.login_admin()
    url = f"/admin/users/{users['staff'].id}/password"
    asked = _post(client, url)
    words = _text(asked)
    assert asked.status_code == 200
    assert "Reset the password of staff@example.com?" in words
    assert "Their current password stops working at once and they are logged out on every device." in words
    assert 'name="confirmed" value="1"' in asked.get_data(as_text=True) and 'id="secret"' not in asked.get_data(
        as_text=True
    )
    # Nothing changed yet: the old password is the one stored.
    db.session.expire_all()
    assert db.session.get(User, users["staff"].id).password_hash == before
    shown = _confirm(client, url)
    assert 'id="secret"' in shown.get_data(as_text=True)
    db.session.expire_all()
    assert db.session.get(User, users["staff"].id).password_hash != before


def test_the_question_speaks_russian_to_a_russian_admin(client, auth, users):
    users["admin"].locale = "ru"
    db.session.commit()
    staff_id = users["staff"].id
    auth.login_admin()
    _fresh_request_state()
    words = _text(_post(client, f"/admin/users/{staff_id}/password"))
    assert "Сбросить пароль staff@example.com?" in words
    assert "Оставить как есть" in words and "Reset" not in words


def test_disabling_asks_and_counts_the_keys_enabling_does_not_ask(client, auth, users):
    create_api_key(db.session, user=users["staff"], name="erp", now=utcnow())
    db.session.commit()
    auth.login_admin()
    url = f"/admin/users/{users['staff'].id}/disabled"
    words = _text(_post(client, url, disabled="1"))
    assert "Disable the account of staff@example.com?" in words
    assert "Their 1 API key is refused until the account is enabled again." in words
    assert not db.session.get(User, users["staff"].id).disabled
    _confirm(client, url, disabled="1")
    db.session.expire_all()
    assert db.session.get(User, users["staff"].id).disabled
    # Giving back is not destructive: it acts at once.
    assert _post(client, url, disabled="0").status_code == 302
    db.session.expire_all()
    assert not db.session.get(User, users["staff"].id).disabled


def test_revoking_a_key_asks_and_says_it_cannot_be_undone(client, auth, users):
    create_api_key(db.session, user=users["staff"], name="erp", now=utcnow())
    db.session.commit()
    key_id = db.session.scalar(select(ApiKey.id))
    auth.login_admin()
    words = _text(_post(client, f"/admin/api-keys/{key_id}/revoke"))
    assert "Revoke the API key erp of staff@example.com?" in words and "This cannot be undone" in words
    assert db.session.get(ApiKey, key_id).revoked_at is None
    assert _confirm(client, f"/admin/api-keys/{key_id}/revoke").status_code == 302
    db.session.expire_all()
    assert db.session.get(ApiKey, key_id).revoked_at is not None


def test_taking_someone_out_of_a_team_asks(client, auth, users):
    from bulksign.models import Team

    team = db.session.scalar(select(Team))
    auth.login_admin()
    url = f"/admin/teams/{team.id}/members/{users['staff'].id}/remove"
    words = _text(_post(client, url, page="/admin/teams"))
    assert f"Take staff@example.com out of {team.name}?" in words
    assert "staff@example.com" in _text(client.get("/admin/teams"))
    assert "left" in _text(client.get(_confirm(client, url, page="/admin/teams").headers["Location"]))


def test_lifting_a_suppression_asks_and_says_why_it_is_there(client, auth, users):
    db.session.add(Suppression(email="gone@example.com", source="bounce", reason="550 no such user", created_at=NOW))
    db.session.commit()
    auth.login_admin()
    words = _text(_post(client, "/admin/suppressions/lift", page="/admin/suppressions/", email="gone@example.com"))
    assert "Mail gone@example.com again?" in words and "hard bounce" in words
    assert db.session.scalar(select(Suppression.lifted_at)) is None
    _confirm(client, "/admin/suppressions/lift", page="/admin/suppressions/", email="gone@example.com")
    db.session.expire_all()
    assert db.session.scalar(select(Suppression.lifted_at)) is not None


def test_staff_get_403_not_the_question(client, auth, users):
    auth.login()
    response = _post(client, f"/admin/users/{users['admin'].id}/password", page="/")
    assert response.status_code == 403 and "admin@example.com" not in response.get_data(as_text=True)


@pytest.fixture
def batch(users):
    return batch_in_states(
        db.session, statuses=["sent", "sent", "opened", "signed"], now=NOW, user_id=users["staff"].id
    )


def _ids(batch_id, status):
    return [
        str(i)
        for i in db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.status == status)
        )
    ]


def test_cancelling_selected_recipients_asks_with_how_many_whose_links_die(client, auth, batch):
    auth.login()
    page = f"/batches/{batch.id}"
    chosen = _ids(batch.id, "sent") + _ids(batch.id, "signed")
    words = _text(_post(client, f"/batches/{batch.id}/actions", page=page, action="cancel", request_ids=chosen))
    # Three chosen, one signed already: two are stopped.
    assert "Cancel 2 requests?" in words
    assert "Their links stop working at once and the recipients can no longer sign." in words
    assert "Selected recipients who already signed, declined or failed stay as they are." in words
    assert len(_ids(batch.id, "cancelled")) == 0
    done = client.post(
        f"/batches/{batch.id}/actions",
        data={"csrf_token": csrf_from(client.get(page)), "action": "cancel", "request_ids": chosen, "confirmed": "1"},
        follow_redirects=True,
    )
    assert "2 requests cancelled; their links no longer work." in _text(done)


def test_cancelling_one_recipient_asks_in_the_singular_in_both_languages(client, auth, users, batch):
    batch_id = batch.id
    url, page = f"/batches/{batch_id}/actions", f"/batches/{batch_id}"
    auth.login()
    one = _ids(batch_id, "opened")
    words = _text(_post(client, url, page=page, action="cancel", request_ids=one))
    assert "Cancel 1 request?" in words and "Its link stops working at once" in words
    users["staff"].locale = "ru"
    db.session.commit()
    _fresh_request_state()
    words = _text(_post(client, url, page=page, action="cancel", request_ids=one))
    assert "Отменить 1 запрос?" in words


def test_cancel_batch_stays_after_the_sending_and_asks_in_place_with_htmx(client, auth, users):
    # Everything mailed (the batch waits for signatures), three still unsigned: they can still be stopped.
    done = batch_in_states(
        db.session,
        statuses=["sent", "opened", "sent", "signed"],
        now=NOW,
        user_id=users["staff"].id,
        batch_status="awaiting_signatures",
    )
    auth.login()
    page = client.get(f"/batches/{done.id}")
    assert 'id="cancel-batch"' in page.get_data(as_text=True)
    step = client.post(
        f"/batches/{done.id}/actions",
        data={"csrf_token": csrf_from(page), "action": "cancel_batch"},
        headers={"HX-Request": "true", "HX-Target": "cancel-batch-step"},
    )
    html = step.get_data(as_text=True)
    assert "<html" not in html and 'data-clear="cancel-batch-step"' in html
    words = _text(step)
    assert f"Cancel the batch {done.name}?" in words
    assert "3 recipients have not signed yet: their links stop working at once and they can no longer sign." in words
    assert "Cancel the batch (3 requests)" in words
    assert len(_ids(done.id, "cancelled")) == 0


def test_cancel_batch_is_gone_once_nobody_can_sign_any_more(client, auth, users):
    signed = batch_in_states(
        db.session, statuses=["signed", "signed"], now=NOW, user_id=users["staff"].id, batch_status="all_signed"
    )
    auth.login()
    assert 'id="cancel-batch"' not in client.get(f"/batches/{signed.id}").get_data(as_text=True)


def test_stop_sharing_asks(client, auth, users, batch):
    share_batch(db.session, batch_id=batch.id, email="admin@example.com", user=users["staff"], now=utcnow())
    db.session.commit()
    auth.login()
    url = f"/batches/{batch.id}/shares/{users['admin'].id}/remove"
    words = _text(_post(client, url, page=f"/batches/{batch.id}"))
    assert f"Stop sharing {batch.name} with admin@example.com?" in words
    assert _confirm(client, url, page=f"/batches/{batch.id}").status_code == 303


def test_a_viewer_is_not_offered_cancel_batch(app, users, batch):
    from bulksign.models import Team
    from bulksign.people.teams import add_member
    from bulksign.people.users import create_user

    viewer = create_user(
        db.session, email="reader@example.com", password="reader-password", role="viewer", now=utcnow()
    )
    add_member(db.session, team=db.session.scalar(select(Team)), user=viewer, by=None, now=utcnow())
    db.session.commit()
    reader = app.test_client()
    reader.post(
        "/auth/login",
        data={
            "email": "reader@example.com",
            "password": "reader-password",
            "csrf_token": csrf_from(reader.get("/auth/login")),
        },
    )
    page = reader.get(f"/batches/{batch.id}")
    assert page.status_code == 200 and 'id="cancel-batch"' not in page.get_data(as_text=True)
