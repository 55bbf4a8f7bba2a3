"""The admins' legal holds refuse what a person can correct, in the admin's language, and change nothing then."""

from __future__ import annotations

import html

from flask import g
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import Event
from tests.support.clock import NOW
from tests.support.waiting import sent_batch
from tests.support.web import csrf_from


def _post(client, path: str, **form):
    token = csrf_from(client.get("/admin/privacy/"))
    return client.post(f"/admin/privacy{path}", data={"csrf_token": token, **form})


def _said(response) -> str:
    return html.unescape(response.get_data(as_text=True))


def _hold_events(batch_id: int) -> list[str]:
    query = select(Event.type).where(Event.batch_id == batch_id, Event.request_id.is_(None)).order_by(Event.id)
    return list(db.session.scalars(query))


def test_placing_and_lifting_a_hold_refuse_a_missing_reason_or_batch_and_record_what_they_did(app, users, client, auth):
    batch_id, _ = sent_batch(user=users["staff"], sent_at=NOW)
    auth.login_admin()

    assert _post(client, "/holds", batch_id="999999", reason="Case 1").status_code == 422
    refused = _post(client, "/holds", batch_id=str(batch_id), reason=" ")
    assert refused.status_code == 422 and "Say why the batch is held (1 to 500 characters)." in _said(refused)
    assert _post(client, "/holds/lift", batch_id="999999", reason="Done").status_code == 404
    not_held = _post(client, "/holds/lift", batch_id=str(batch_id), reason="Done")
    assert not_held.status_code == 422 and "The batch is not on legal hold." in _said(not_held)
    assert _hold_events(batch_id) == []

    assert _post(client, "/holds", batch_id=str(batch_id), reason="Case 1").status_code == 303
    assert _post(client, "/holds/lift", batch_id=str(batch_id), reason="Settled").status_code == 303
    assert _hold_events(batch_id) == ["batch.hold_placed", "batch.hold_lifted"]

    users["admin"].locale = "ru"
    db.session.commit()
    g.pop("_login_user", None)
    g.pop("_flask_babel", None)  # Flask-Babel caches the locale on g
    russian = _post(client, "/holds/lift", batch_id=str(batch_id), reason=" ")
    assert "Укажите причину снятия удержания (от 1 до 500 символов)." in _said(russian)
