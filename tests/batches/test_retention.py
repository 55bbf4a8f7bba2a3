"""Retention under a controlled clock: a declined request loses its files and personal data after its days, a
signed one is kept (for ever by default), a legal hold keeps both, an erasure reaches every batch, and a purge
killed midway finishes on its next run without purging anything twice."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from bulksign.batches import counts as batch_counts
from bulksign.batches import retention
from bulksign.batches.erasure import LEGAL_HOLD, SIGNED_KEPT, erase_person
from bulksign.core.extensions import db, get_redis
from bulksign.documents.document_pages import image_key, page_image
from bulksign.documents.storage import get_storage
from bulksign.models import Document, Event, Export, FieldValue, OutgoingMail, Party, Team, User
from bulksign.models.status import Status
from bulksign.signing.field_entry import FilledForm, Upload
from bulksign.signing.recipient_actions import decline, open_request
from bulksign.work.queues import PURGE_RETENTION
from tests.support.accounts import ADMIN
from tests.support.clock import NOW
from tests.support.sealed import signed_document, signed_request, upload
from tests.support.signing_requests import fresh, make_sent_request
from tests.support.web import csrf_from

DAY = timedelta(days=1)


def declined_request(owner, *, email="ivan@example.com", template_name="Declined contract"):
    r = make_sent_request(now=NOW, owner=owner, email=email, template_name=template_name)
    open_request(db.session, request_id=r.id, now=NOW + timedelta(minutes=5), ip="203.0.113.5", user_agent="Phone/1")
    decline(
        db.session,
        request_id=r.id,
        now=NOW + timedelta(minutes=6),
        reason="My salary is wrong",
        ip="203.0.113.5",
        user_agent="Phone/1",
    )
    return r


def purge(now):
    return retention.purge_due(db.session, storage=get_storage(), now=now, on_page=db.session.commit, upload_hours=24)


def keys_of(request_id: int) -> list[str]:
    return list(db.session.scalars(select(Document.storage_key).where(Document.request_id == request_id)))


def by_hash(client, sha256: str):
    form = client.get("/verify")
    return client.post("/verify", data={"csrf_token": csrf_from(form), "sha256": sha256}).get_data(as_text=True)


def team() -> Team:
    return db.session.scalar(select(Team))


def admin() -> User:
    """The admin, read again: the workers' runs end the session that loaded the fixture's."""
    return db.session.scalar(select(User).where(User.email == ADMIN[0]))


def test_a_declined_request_is_purged_after_its_days_and_verify_still_knows_its_original(app, client, users):
    r = declined_request(users["staff"])
    manager = Party(
        request_id=r.id, batch_id=r.batch_id, role="manager", step=1, source="row", email="boss@example.com"
    )
    db.session.add(manager)
    db.session.commit()
    manager_id = manager.id
    original = db.session.scalar(select(Document).where(Document.request_id == r.id, Document.kind == "original"))
    # The recipient's page rendered its first page image: it is stored beside the document.
    assert page_image(storage=get_storage(), redis=get_redis(), document=original, number=1)
    stored = [*keys_of(r.id), image_key(original, 1)]
    assert all(get_storage().exists(key) for key in stored)
    ended = fresh(r.id).status_changed_at

    assert purge(ended + 89 * DAY).requests == 0
    assert retention.preview(db.session, now=ended + 90 * DAY)[0].unsigned == 1
    result = purge(ended + 90 * DAY)

    assert result.requests == 1 and result.documents == 1
    assert not any(get_storage().exists(key) for key in stored)
    row = fresh(r.id)
    assert row.purged_at == ended + 90 * DAY and row.status == Status.DECLINED
    assert (row.email, row.name, row.phone, row.data, row.decline_reason, row.signer_ip) == (
        "",
        "",
        None,
        {},
        None,
        None,
    )
    events = db.session.scalars(select(Event).where(Event.request_id == r.id).order_by(Event.id)).all()
    assert [e.type for e in events][-1] == retention.PURGED_EVENT and "status.declined" in [e.type for e in events]
    assert all(e.ip is None and e.user_agent is None for e in events)
    assert db.session.get(Party, manager_id).email is None
    assert db.session.scalar(select(func.count()).where(OutgoingMail.to_email == "ivan@example.com")) == 0
    # The proof stays: the batch still counts its declined request, /verify still names the original.
    assert batch_counts.counters(db.session, [r.batch_id])[r.batch_id][Status.DECLINED] == 1
    assert "Original document" in by_hash(client, hashlib.sha256(r.original).hexdigest())
    # Run again: nothing is left to do.
    assert purge(ended + 200 * DAY).requests == 0


def test_a_signed_request_is_kept_for_ever_by_default_and_after_its_days_keeps_its_proof(app, client, users, run_jobs):
    r = signed_request(owner=users["staff"], image=True)
    run_jobs("pdf")
    sealed = get_storage().get(signed_document(r.id).storage_key)

    assert purge(NOW + 3650 * DAY).requests == 0
    assert fresh(r.id).signature_image is not None

    retention.set_team_retention(db.session, team=team(), keep_signed_days=365, keep_unsigned_days=30, now=NOW)
    db.session.commit()
    get_storage().put("exports/zip-1.zip", b"PK\x05\x06" + b"\x00" * 18, content_type="application/zip")
    export = Export(batch_id=r.batch_id, status="ready", storage_key="exports/zip-1.zip", created_at=NOW + DAY)
    db.session.add(export)
    db.session.commit()
    export_id = export.id
    assert purge(NOW + 364 * DAY).requests == 0
    assert purge(NOW + 366 * DAY).requests == 1
    # The batch's ZIP held a copy of the signed PDF: it is gone too, and says why.
    assert not get_storage().exists("exports/zip-1.zip")
    gone = db.session.get(Export, export_id)
    assert (gone.status, gone.storage_key, gone.error) == ("failed", None, retention.EXPORT_PURGED)
    row = fresh(r.id)
    assert row.signature_image is None and row.signer_name is None and row.status == Status.SIGNED
    assert not get_storage().exists(signed_document(r.id).storage_key)
    # The kept copy (the recipient's own) still verifies: signed on its day, under our seal.
    html = upload(client, sealed).get_data(as_text=True)
    assert "Valid signed document" in html and "Employment contract" in html and "Иван Петров" not in html


def test_a_batch_s_own_days_overrule_its_team_s(app, users):
    r = declined_request(users["staff"])
    retention.set_batch_retention(db.session, batch_id=r.batch_id, keep_signed_days=None, keep_unsigned_days=7)
    db.session.commit()
    assert purge(NOW + 8 * DAY).requests == 1


def test_a_legal_hold_keeps_signed_and_declined_until_it_is_lifted(app, users, run_jobs):
    declined = declined_request(users["staff"])
    signed = signed_request(owner=users["staff"], image=False, template_name="Signed contract")
    run_jobs("pdf")
    retention.set_team_retention(db.session, team=team(), keep_signed_days=1, keep_unsigned_days=1, now=NOW)
    for r in (declined, signed):
        retention.place_hold(db.session, batch_id=r.batch_id, reason="Case 4711", by=admin(), now=NOW)
    db.session.commit()
    with pytest.raises(retention.RetentionError):
        retention.place_hold(db.session, batch_id=declined.batch_id, reason="again", by=None, now=NOW)

    assert purge(NOW + 1000 * DAY).requests == 0
    assert retention.preview(db.session, now=NOW + 1000 * DAY) == []
    erasure = erase_person(db.session, storage=get_storage(), email="IVAN@example.com", by=None, now=NOW + 1000 * DAY)
    assert not erasure.erased and {k.reason for k in erasure.kept} == {LEGAL_HOLD}
    assert {k.hold_reason for k in erasure.kept} == {"Case 4711"}
    assert all(get_storage().exists(key) for key in keys_of(declined.id) + keys_of(signed.id))

    retention.lift_hold(db.session, batch_id=declined.batch_id, reason="Case closed", by=admin(), now=NOW)
    db.session.commit()
    assert purge(NOW + 1000 * DAY).requests == 1 and fresh(declined.id).purged_at and not fresh(signed.id).purged_at
    types = db.session.scalars(
        select(Event.type).where(Event.batch_id == declined.batch_id, Event.request_id.is_(None)).order_by(Event.id)
    )
    assert list(types) == [retention.HOLD_PLACED, retention.HOLD_LIFTED]


def test_an_erasure_by_address_reaches_every_batch_and_says_what_it_kept(app, users, run_jobs):
    declined = declined_request(users["staff"], email="Ivan@Example.com")
    waiting = make_sent_request(now=NOW, owner=users["staff"], template_name="Open contract")
    signed = signed_request(owner=users["staff"], image=False, template_name="Signed contract")
    other = make_sent_request(now=NOW, owner=users["staff"], email="anna@example.com", template_name="Anna's")
    run_jobs("pdf")

    erasure = erase_person(db.session, storage=get_storage(), email=" ivan@EXAMPLE.com ", by=admin(), now=NOW)
    db.session.commit()

    assert {(e.request_id, e.status) for e in erasure.erased} == {(declined.id, "declined"), (waiting.id, "cancelled")}
    assert [(k.request_id, k.reason, k.kept_until) for k in erasure.kept] == [(signed.id, SIGNED_KEPT, None)]
    assert fresh(declined.id).email == "" and fresh(waiting.id).status == Status.CANCELLED
    assert fresh(waiting.id).purged_at == NOW and not get_storage().exists(keys_of(waiting.id)[0])
    assert fresh(signed.id).email == "ivan@example.com" and fresh(other.id).email == "anna@example.com"
    again = erase_person(db.session, storage=get_storage(), email="ivan@example.com", by=None, now=NOW)
    assert not again.erased and len(again.kept) == 1


class _Killed(RuntimeError):
    pass


class _DiesAfter:
    """The storage as the purge sees it, killed (an exception out of the job) after ``n`` deletions."""

    def __init__(self, storage, n):
        self.storage, self.left = storage, n

    def __getattr__(self, name):
        return getattr(self.storage, name)

    def delete(self, key):
        if self.left == 0:
            raise _Killed(key)
        self.left -= 1
        self.storage.delete(key)


def test_a_purge_killed_midway_removes_the_rest_on_its_next_run_and_nothing_twice(app, users, monkeypatch):
    rows = [declined_request(users["staff"], template_name=f"Contract {i}") for i in range(5)]
    monkeypatch.setattr(retention.purge, "CHUNK", 2)
    later = NOW + 100 * DAY

    with pytest.raises(_Killed):
        retention.purge_due(
            db.session, storage=_DiesAfter(get_storage(), 3), now=later, on_page=db.session.commit, upload_hours=24
        )
    db.session.rollback()
    purged = [r.id for r in rows if fresh(r.id).purged_at]
    assert len(purged) == 2  # the first chunk committed; the second died between its files and its rows

    assert PURGE_RETENTION.func(now=later) == 3
    for r in rows:
        assert fresh(r.id).purged_at and not get_storage().exists(keys_of(r.id)[0])
        marks = select(func.count()).where(Event.request_id == r.id, Event.type == retention.PURGED_EVENT)
        assert db.session.scalar(marks) == 1
    assert PURGE_RETENTION.func(now=later) == 0


@pytest.mark.parametrize("value", [0, -1, "x", 36501, True])
def test_days_outside_1_to_36500_are_refused(value):
    with pytest.raises(retention.RetentionError):
        retention.check_days(value, name="keep_unsigned_days")


def test_forever_is_said_by_no_number_for_signed_only():
    assert retention.check_days("", name="keep_signed_days", allow_forever=True) is None
    assert retention.check_days("forever", name="keep_signed_days", allow_forever=True) is None
    assert retention.check_days("30", name="keep_signed_days") == 30
    with pytest.raises(retention.RetentionError):
        retention.check_days(None, name="keep_unsigned_days")


def test_rows_left_out_at_creation_go_after_the_unsigned_days_or_with_an_erasure_but_not_under_a_hold(app, users):
    from bulksign.models.batches import BatchSkippedRow

    first = make_sent_request(now=NOW, owner=users["staff"], template_name="First")
    second = make_sent_request(now=NOW, owner=users["staff"], template_name="Second")
    held = make_sent_request(now=NOW, owner=users["staff"], template_name="Held")
    for r in (first, second, held):
        for row, email in ((3, "Ivan@Example.com"), (4, "olga@example.com")):
            db.session.add(BatchSkippedRow(batch_id=r.batch_id, row_number=row, cells={"E-mail": email}, reasons=[]))
    retention.place_hold(db.session, batch_id=held.batch_id, reason="Case 1", by=None, now=NOW)
    db.session.commit()

    def left(batch_id):
        rows = select(BatchSkippedRow.row_number).where(BatchSkippedRow.batch_id == batch_id)
        return sorted(db.session.scalars(rows))

    erasure = erase_person(db.session, storage=get_storage(), email="ivan@example.com", by=None, now=NOW)
    db.session.commit()
    assert erasure.skipped_rows == 2 and left(first.batch_id) == left(second.batch_id) == [4]
    assert left(held.batch_id) == [3, 4]

    assert purge(NOW + 89 * DAY).skipped_rows == 0
    assert purge(NOW + 90 * DAY).skipped_rows == 2
    assert left(first.batch_id) == left(second.batch_id) == [] and left(held.batch_id) == [3, 4]


def test_what_a_signer_filled_in_is_purged_with_the_request_and_an_attachments_hash_stays(app, users):
    from tests.signing.test_field_entry import CONTRACT, FIELDS, a_png, sign_filled

    r = make_sent_request(now=NOW, owner=users["staff"], html=CONTRACT, fields=FIELDS)
    scan = a_png()
    filled = FilledForm(
        typed={"iban": "DE89370400440532013000", "salary": "4500", "start": "2027-03-01", "rules": "yes", "tax": "I"},
        files={"id_scan": Upload(filename="passport.png", data=scan)},
        attachment_max_bytes=10**6,
        storage=get_storage(),
    )
    assert sign_filled(r.id, filled, now=NOW + DAY) == "signed"
    key = db.session.scalar(select(FieldValue.storage_key).where(FieldValue.name == "id_scan"))
    assert get_storage().get(key) == scan
    retention.set_team_retention(db.session, team=team(), keep_signed_days=30, keep_unsigned_days=30, now=NOW)
    db.session.commit()

    assert purge(NOW + 40 * DAY).requests == 1
    assert not get_storage().exists(key)
    db.session.expire_all()
    values = db.session.scalars(select(FieldValue).where(FieldValue.request_id == r.id)).all()
    assert len(values) == 7 and all(v.value is None and v.storage_key is None and v.entered_ip is None for v in values)
    (attachment,) = [v for v in values if v.name == "id_scan"]
    assert attachment.sha256 == hashlib.sha256(scan).hexdigest()
