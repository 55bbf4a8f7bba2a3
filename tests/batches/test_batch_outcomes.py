"""What a batch says it is, as its owner and an integrator see it.

Sending ending is not the batch's end: the owner hears when everyone signed, or when the batch closed with some
unsigned, one mail each; the API names the states by what they mean and gives the deadline; the batch page shows
the deadline's date in the batch's zone and the page's language, and the rows of the file that were left out.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

from bulksign.batches.progress import mark_batch_started
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.jobs.periodic import rollup_batches
from bulksign.models import Batch
from bulksign.models.status import Status
from bulksign.people.users import create_api_key
from tests.support.clock import NOW
from tests.support.waiting import mails
from tests.support.waiting import sent_batch as invited
from tests.support.web import csrf_from

DAY = timedelta(days=1)


def sent_batch(**fields) -> tuple[int, list[int]]:
    """A batch whose invitations all went out, still sending as the pipeline leaves it until the roll-up."""
    batch_id, ids = invited(**fields)
    mark_batch_started(db.session, batch_id=batch_id, now=fields["sent_at"])
    db.session.commit()
    return batch_id, ids


def _as_russian(user):
    """The staff member reads Russian from the next request on (the test shares the client's app context)."""
    from flask import g

    user.locale = "ru"
    db.session.commit()
    g.pop("_login_user", None)
    g.pop("_flask_babel", None)  # Flask-Babel caches the locale on g


def _sign(request_id, at):
    transition(db.session, request_id, frm=Status.SENT, to=Status.OPENED, now=at)
    transition(db.session, request_id, frm=Status.OPENED, to=Status.SIGNED, now=at)
    db.session.commit()


def _decline(request_id, at):
    transition(db.session, request_id, frm=Status.SENT, to=Status.OPENED, now=at)
    transition(db.session, request_id, frm=Status.OPENED, to=Status.DECLINED, now=at, decline_reason="No")
    db.session.commit()


def _api(client, users):
    secret = create_api_key(db.session, user=users["staff"], name="integration", now=NOW).secret
    db.session.commit()
    return lambda batch_id: client.get(f"/api/v1/batches/{batch_id}", headers={"Authorization": f"Bearer {secret}"})


def test_the_owner_hears_nothing_when_sending_ends_and_one_mail_when_everyone_signed(
    app, users, client, smtp, run_jobs
):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=2, name="Employment contract")
    shown = _api(client, users)
    assert shown(batch_id).json["status"] == "sending" and shown(batch_id).json["deadline_at"] is None

    assert rollup_batches(now=NOW + timedelta(minutes=1)) == 1
    run_jobs("mail")
    body = shown(batch_id).json
    assert (body["status"], body["unsigned"], smtp.received) == ("awaiting_signatures", 2, [])
    # Each request's deadline is 7 days after its invitation: the batch's is when its last link expires.
    assert body["deadline_at"].startswith("2026-11-09T09:00:00")
    assert body["sending_ended_at"] is not None and body["settled_at"] is None

    _sign(ids[0], NOW + DAY)
    assert rollup_batches(now=NOW + DAY) == 0
    _sign(ids[1], NOW + 2 * DAY)
    assert rollup_batches(now=NOW + 2 * DAY) == 1
    assert rollup_batches(now=NOW + 2 * DAY + timedelta(seconds=15)) == 0  # told once
    run_jobs("mail")
    (notice,) = smtp.received
    assert notice.kind == "all-signed-notice" and notice.message["To"] == "staff@example.com"
    assert notice.subject == 'Everyone signed "Employment contract"'
    assert 'Every recipient of "Employment contract" has signed: 2 of 2.' in notice.text()
    assert f"/batches/{batch_id}" in notice.text()
    body = shown(batch_id).json
    assert (body["status"], body["unsigned"], body["counts"]["signed"]) == ("all_signed", 0, 2)
    assert body["settled_at"].startswith((NOW + 2 * DAY).strftime("%Y-%m-%dT%H:%M"))


def test_a_batch_nobody_can_sign_any_more_closes_with_one_notice_in_the_owners_language(
    app, users, client, smtp, run_jobs
):
    users["staff"].locale = "ru"
    db.session.commit()
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=3, name="Договор")
    rollup_batches(now=NOW + timedelta(minutes=1))
    _sign(ids[0], NOW + DAY)
    _decline(ids[1], NOW + DAY)
    transition(db.session, ids[2], frm=Status.SENT, to=Status.CANCELLED, now=NOW + DAY)
    db.session.commit()
    assert rollup_batches(now=NOW + DAY + timedelta(seconds=15)) == 1
    run_jobs("mail")
    (notice,) = smtp.received
    assert notice.kind == "completion-notice"
    assert notice.subject == "Рассылка «Договор» закрыта: подписали 1 из 3"
    text = notice.text()
    for line in ("Подписали: 1 из 3", "Отклонено: 1", "Отменены: 1", "Не подписали до срока: 0"):
        assert line in text, text
    assert "dispatched" not in text and "Signed" not in text
    body = _api(client, users)(batch_id).json
    assert (body["status"], body["unsigned"]) == ("closed", 2)
    assert [m.status for m in mails("completion_notice")] == ["sent"]


def test_a_closed_batch_reopened_by_a_resend_and_then_signed_by_all_tells_that_too(app, users, client, smtp, run_jobs):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=1)
    _decline(ids[0], NOW + DAY)
    rollup_batches(now=NOW + DAY)
    assert db.session.get(Batch, batch_id).status == "closed"
    # Staff invite the decliner again: the batch is sending once more, then awaits, then everyone signed.
    from bulksign.batches.states import move_batches
    from bulksign.models.status import BatchStatus

    transition(db.session, ids[0], frm=Status.DECLINED, to=Status.GENERATED, now=NOW + 2 * DAY)
    move_batches(db.session, batch_id, frm=BatchStatus.CLOSED, to=BatchStatus.PROCESSING, settled_at=None)
    for frm, to in ((Status.GENERATED, Status.SENDING), (Status.SENDING, Status.SENT)):
        transition(db.session, ids[0], frm=frm, to=to, now=NOW + 2 * DAY)
    db.session.commit()
    rollup_batches(now=NOW + 2 * DAY)
    assert db.session.get(Batch, batch_id).status == "awaiting_signatures"
    _sign(ids[0], NOW + 3 * DAY)
    rollup_batches(now=NOW + 3 * DAY)
    run_jobs("mail")
    assert [m.kind for m in smtp.received] == ["completion-notice", "all-signed-notice"]


def _create_from_file(client, auth, template_id: int, data: bytes, **settings) -> int:
    page = client.get(f"/batches/new?template_id={template_id}")
    preview = client.post(
        "/batches/new/validate",
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "template_id": template_id, "file": (io.BytesIO(data), "people.csv")},
    )
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)
    token = re.search(r'name="form_token" value="([0-9a-f]+)"', page.get_data(as_text=True)).group(1)
    made = client.post(
        "/batches/new",
        data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": token, **settings},
    )
    assert made.status_code == 303, made.get_data(as_text=True)[:800]
    return int(made.headers["Location"].rsplit("/", 1)[1])


FILE = (
    b"email,name,salary\n"
    b"anna@example.com,Anna,100\n"
    b"not-an-address,Bob,200\n"
    b"carl@example.com,Carl,300\n"
    b'dora@exampl,=HYPERLINK("x"),400\n'
    b"eve@example.com,Eve,500\n"
)


def test_rows_left_out_at_creation_are_counted_on_the_page_and_in_the_api_and_downloadable(app, users, client, auth):
    from bulksign.doc_templates.versions import create_template

    template = create_template(
        db.session, name="Pay", html="<p>{{ name }}: {{ salary }}</p>", user=users["staff"], now=NOW
    ).template
    db.session.commit()
    auth.login()
    batch_id = _create_from_file(client, auth, template.id, FILE)
    told = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "2 rows with errors were left out: the batch page keeps them, with the reasons, to download." in told
    batch = db.session.get(Batch, batch_id)
    assert (batch.total_count, batch.skipped_count) == (3, 2)
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    shown = re.search(r'<dd id="skipped-rows">(.*?)</dd>', page, re.S).group(1)
    assert "2 rows of the file had errors and were not sent" in shown and "(2 of 5)" in shown
    assert _api(client, users)(batch_id).json["skipped_rows"] == 2

    got = client.get(f"/batches/{batch_id}/skipped-rows.csv")
    assert got.status_code == 200 and got.mimetype == "text/csv"
    assert "attachment" in got.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(got.get_data(as_text=True).lstrip("\ufeff"))))
    assert rows[0] == ["row", "column", "reason", "email", "name", "salary"]
    assert [r[0] for r in rows[1:]] == ["3", "5"]
    assert rows[1][3:] == ["not-an-address", "Bob", "200"]
    # The row's cells are made safe for a spreadsheet: the formula is not run when the file is opened.
    assert rows[2][4] == '\'=HYPERLINK("x")'
    assert all(r[2] for r in rows[1:])

    # In Russian, the reasons are too; the file is only for those who may see the batch.
    _as_russian(users["staff"])
    russian = client.get(f"/batches/{batch_id}/skipped-rows.csv").get_data(as_text=True)
    assert '"3","email","Неверный адрес электронной почты' in russian
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "2 строки файла с ошибками не отправлены" in page
    auth.logout()
    from bulksign.people.users import create_user

    create_user(db.session, email="other@example.com", password="other-password", role="staff", now=NOW)
    db.session.commit()
    auth.login("other@example.com", "other-password")  # in no team of the batch's
    assert client.get(f"/batches/{batch_id}/skipped-rows.csv").status_code == 404


def test_the_deadline_is_a_date_in_the_batchs_zone_and_the_pages_language_once_sent(app, users, client, auth):
    batch_id, _ = sent_batch(user=users["staff"], sent_at=NOW, recipients=2, timezone="Europe/Moscow")
    auth.login()
    assert _deadline(client.get(f"/batches/{batch_id}").get_data(as_text=True)) == "7 days after sending"
    rollup_batches(now=NOW + timedelta(minutes=1))
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    # Sent at 09:00 UTC on 2 November, 7 days to sign: 12:00 in Moscow on the 9th.
    assert _deadline(page) == "9 November 2026, 12:00 (Europe/Moscow) (the last link; 7 days after each invitation)"
    assert ">9 November 2026</time></td>" in client.get("/batches/").get_data(as_text=True)
    _as_russian(users["staff"])
    assert _deadline(client.get(f"/batches/{batch_id}").get_data(as_text=True)) == (
        "9 ноября 2026, 12:00 (Europe/Moscow) (последняя ссылка; 7 дней после каждого приглашения)"
    )


def _deadline(page: str) -> str:
    cell = re.search(r'<dd id="deadline">(.*?)</dd>', page, re.S).group(1)
    return re.sub(r"\s+", " ", re.sub("<[^>]+>", "", cell)).strip()


def test_end_to_end_the_owner_is_told_once_when_the_last_recipient_signs_through_the_signing_flow(
    app, users, client, smtp, run_jobs
):
    """Real renders, invitations, signatures and seals: the owner's mail comes with the last signature, not with
    the last invitation ("is done" at Signed 0 / Waiting 35)."""
    from bulksign.signing.recipient_actions import sign
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import make_batch, request_ids

    shown = _api(client, users)
    batch_id = make_batch(user=users["staff"], now=NOW, recipients=2, name="Offer letters")
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    assert shown(batch_id).json["status"] == "awaiting_signatures"
    assert [m.kind for m in smtp.received] == ["invitation", "invitation"]
    for request_id in request_ids(batch_id):
        done = sign(
            db.session,
            request_id=request_id,
            now=NOW + DAY,
            signer_name="Signer",
            signature_png=None,
            consent=True,
            ip="127.0.0.1",
            user_agent="test",
        )
        assert done.status == "signed"
        run_jobs("pdf", "mail")  # the seal, the signer's copy
        rollup_batches(now=NOW + DAY + timedelta(seconds=15))
        run_jobs("mail")
    told = [m for m in smtp.received if m.message["To"] == "staff@example.com"]
    assert [m.kind for m in told] == ["all-signed-notice"]
    assert told[0].subject == 'Everyone signed "Offer letters"'
    assert shown(batch_id).json["status"] == "all_signed"
