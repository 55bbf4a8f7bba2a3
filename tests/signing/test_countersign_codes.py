"""One-time codes on the countersigner's page: in a batch that asks for one, one code of the link (SMS to
the countersigner's phone when given, else mail) unlocks the page of all their documents; before it nothing of them
shows and nothing is signed; after it "Sign all" works as in other batches, and every document's audit certificate
names the check. On real workers, real mail (aiosmtpd), the development SMS mailbox and real PDFs."""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta

from sqlalchemy import func, select, update

from bulksign.batches.retention.purge import purge_requests
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.jobs.countersign import sign_chunk
from bulksign.mail.devmail import list_caught, mailbox_folder, read_caught
from bulksign.models import (
    Batch,
    CountersignLink,
    CountersignRun,
    Document,
    Event,
    OneTimeCode,
    OutgoingMail,
    Party,
    SigningRequest,
    utcnow,
)
from bulksign.signing import countersign, countersign_runs
from bulksign.signing import one_time_codes as otp
from bulksign.signing.countersign_listed import Listed
from bulksign.views.recipient.countersign import VERIFIED_LINK_CODES
from bulksign.work.pipeline import enqueue_renders
from tests.signing.test_countersign import HR, _digest_token, _digests, _sign_form
from tests.signing.test_routing import EMPLOYER, _batch
from tests.support.batches import request_ids
from tests.support.partydata import recipients_sign
from tests.support.web import csrf_from

PHONE_EMPLOYER = {
    "parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss", "phone": "+49 170 7654321"}}'
}
ROWS = "email,name\n" + "".join(f"e{i}@example.com,Employee {i}\n" for i in range(1, 4))


def _ready(users, smtp, run_jobs, *, form=EMPLOYER, rows=ROWS) -> tuple[list[int], str]:
    """A batch whose employees all signed, then set to ask for one-time codes: its request ids and the employer's
    countersign link (from the digest)."""
    ids = request_ids(_batch({"staff": db.session.merge(users["staff"])}, file=rows, form=form))
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    recipients_sign(db.session, ids)
    run_jobs("pdf", "mail")
    db.session.execute(update(Batch).values(one_time_code=True))
    db.session.commit()
    return ids, _digest_token(_digests(smtp)[-1])


def _code(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


def _wrong(code: str) -> str:
    return str((int(code) + 1) % 1_000_000).zfill(6)


def _employer(request_id: int) -> Party:
    db.session.expire_all()
    return db.session.scalars(select(Party).where(Party.request_id == request_id, Party.role == "employer")).one()


def _sms_code(app) -> str:
    folder = mailbox_folder(app.config["VAR_DIR"])
    texts = [m for m in list_caught(folder).mails if m.subject == "SMS to +49 170 7654321"]
    return _code(read_caught(folder, texts[-1].name).get_content())


def _verify(client, token: str, code: str, csrf: str):
    return client.post(f"/countersign/{token}/code/verify", data={"csrf_token": csrf, "code": code})


def test_one_code_by_sms_unlocks_the_page_then_sign_all_signs_and_each_certificate_names_the_check(
    app, users, client, auth, smtp, run_jobs, tmp_path
):
    ids, token = _ready(users, smtp, run_jobs, form=PHONE_EMPLOYER)
    parties = [_employer(i).id for i in ids]

    # Before a code: the code step, with the masked phone; no document, no name, no sign form.
    page = client.get(f"/countersign/{token}")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and "Send me a code" in text and "••••••••••21" in text
    assert "Employee" not in text and "e1@example.com" not in text and "sign-form" not in text
    csrf = csrf_from(page)
    for path in (f"documents/{parties[0]}", f"documents/{parties[0]}/pages/1", "runs/1", f"signed/{parties[0]}"):
        assert client.get(f"/countersign/{token}/{path}").status_code == 403
    # Sign-all posted anyway (a stale or forged form): refused, nothing signed, no run.
    refused = _sign_form(client, token, all="1")
    assert refused.status_code == 403 and "Send me a code" in refused.get_data(as_text=True)
    declined = client.post(
        f"/countersign/{token}/documents/{parties[0]}/decline", data={"csrf_token": csrf, "reason": "No"}
    )
    assert declined.status_code == 403
    assert db.session.scalar(select(func.count()).select_from(CountersignRun)) == 0
    assert {_employer(i).status for i in ids} == {"invited"}

    # One code for the link, by SMS to the fixed party's phone; a wrong one counts down.
    assert client.post(f"/countersign/{token}/code", data={"csrf_token": csrf}).status_code == 303
    run_jobs("mail")
    code = _sms_code(app)
    (row,) = db.session.scalars(select(OneTimeCode)).all()
    link = db.session.scalars(select(CountersignLink)).one()
    assert (row.countersign_link_id, row.request_id, row.channel) == (link.id, None, "sms")
    code_id = row.id
    wrong = _verify(client, token, _wrong(code), csrf)
    assert wrong.status_code == 422 and "4 more tries" in wrong.get_data(as_text=True)
    assert "Employee" not in wrong.get_data(as_text=True)
    assert _verify(client, token, code, csrf).status_code == 303

    # Unlocked: the page of a batch without codes, and the documents read as page images.
    listing = client.get(f"/countersign/{token}").get_data(as_text=True)
    assert "Employee 1" in listing and "All 3 documents" in listing and "Send me a code" not in listing
    assert client.get(f"/countersign/{token}/documents/{parties[0]}/pages/1").mimetype == "image/webp"

    # A decline, then sign all the rest: each document records the code check in its own trail.
    page = client.get(f"/countersign/{token}/documents/{parties[2]}")
    assert (
        client.post(
            f"/countersign/{token}/documents/{parties[2]}/decline",
            data={"csrf_token": csrf_from(page), "reason": "Wrong salary"},
        ).status_code
        == 303
    )
    started = _sign_form(client, token, all="1")
    assert started.status_code == 303
    run = db.session.scalars(select(CountersignRun)).one()
    assert run.code_id == code_id and len(run.party_ids) == 2
    run_id, chosen = run.id, run.party_ids
    run_jobs("default", "pdf", "mail")
    assert [_employer(i).status for i in ids] == ["signed", "signed", "declined"]

    def proofs(request_id: int) -> list[Event]:
        return list(
            db.session.scalars(
                select(Event).where(Event.request_id == request_id, Event.type == "code.verified").order_by(Event.id)
            )
        )

    verified_at = db.session.get(OneTimeCode, code_id).verified_at
    for request_id in ids:
        (proof,) = proofs(request_id)
        assert proof.details == {
            "code_id": code_id,
            "channel": "sms",
            "to": "••••••••••21",
            "role": "employer",
            "countersign": True,
        }
        assert proof.created_at == verified_at and proof.ip == "127.0.0.1"
    # A chunk run again (a worker killed after its commits) signs nothing twice and records nothing twice.
    assert sign_chunk(run_id, chosen) == {"gone": 2}
    assert [len(proofs(i)) for i in ids] == [1, 1, 1]

    # Staff see the check on each request's panel.
    auth.login()
    batch_id = db.session.get(SigningRequest, ids[0]).batch_id
    panel = client.get(f"/batches/{batch_id}/requests/{ids[0]}").get_data(as_text=True)
    assert "code.verified" in panel and "••••••••••21" in panel

    for request_id in ids[:2]:
        (signed,) = db.session.scalars(
            select(Document).where(Document.request_id == request_id, Document.kind == "signed")
        )
        path = tmp_path / f"signed-{request_id}.pdf"
        path.write_bytes(get_storage().get(signed.storage_key))
        pdf_text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, timeout=30).stdout
        certificate = " ".join(pdf_text[pdf_text.index("Audit certificate") :].split())
        assert "Anna Boss" in certificate
        assert "One-time code sent by SMS to ••••••••••21, confirmed" in certificate
        assert "confirmed on the countersigning page" in certificate


def test_the_code_locks_after_its_tries_and_only_a_fresh_code_of_this_link_unlocks(app, users, client, smtp, run_jobs):
    ids, token = _ready(users, smtp, run_jobs, rows="email,name\ne1@example.com,Employee 1\ne2@example.com,E 2\n")
    page = client.get(f"/countersign/{token}")
    csrf = csrf_from(page)
    assert "h•••@acme.example" in page.get_data(as_text=True)  # no phone: by mail to the link's address

    assert client.post(f"/countersign/{token}/code", data={"csrf_token": csrf}).status_code == 303
    again = client.post(f"/countersign/{token}/code", data={"csrf_token": csrf})
    assert again.status_code == 429 and "ask for a new one in" in again.get_data(as_text=True)
    run_jobs("mail")
    (mailed,) = smtp.of_kind("code")
    assert mailed.rcpt_tos == [HR] and "Anna Boss" in mailed.text()
    code = _code(mailed.text())
    answers = [_verify(client, token, _wrong(code), csrf) for _ in range(otp.MAX_TRIES)]
    assert [a.status_code for a in answers] == [422] * otp.MAX_TRIES
    assert "That was the last try" in answers[-1].get_data(as_text=True)
    locked = _verify(client, token, code, csrf)
    assert locked.status_code == 422 and "Employee" not in locked.get_data(as_text=True)
    assert "entered wrongly too often" in client.get(f"/countersign/{token}").get_data(as_text=True)
    link = db.session.scalars(select(CountersignLink)).one()
    assert list(
        db.session.scalars(
            select(Event.type).where(Event.request_id.is_(None), Event.type.like("code.%")).order_by(Event.id)
        )
    ) == ["code.sent"] + ["code.failed"] * otp.MAX_TRIES + ["code.locked"]

    # A verified code of a request, or of another link, kept in the session does not unlock this link.
    now = utcnow()
    other = CountersignLink(batch_id=link.batch_id, email="other@acme.example", token_hash="x" * 64, token_nonce="n")
    db.session.add(other)
    db.session.flush()
    foreign = [
        OneTimeCode(
            countersign_link_id=other.id,
            channel="email",
            destination="other@acme.example",
            nonce="0" * 32,
            code_hash="0" * 64,
            created_at=now,
            expires_at=now + otp.CODE_TTL,
            attempts=1,
            verified_at=now,
        ),
        OneTimeCode(
            request_id=ids[0],
            channel="email",
            destination="e1@example.com",
            nonce="1" * 32,
            code_hash="1" * 64,
            created_at=now,
            expires_at=now + otp.CODE_TTL,
            attempts=1,
            verified_at=now,
        ),
    ]
    db.session.add_all(foreign)
    db.session.commit()
    for code_row in foreign:
        with client.session_transaction() as browser:
            browser[VERIFIED_LINK_CODES] = {str(link.id): code_row.id}
        assert "Send me a code" in client.get(f"/countersign/{token}").get_data(as_text=True)
        assert _sign_form(client, token, all="1").status_code == 403

    # A new code (after the pause) unlocks; once older than VERIFIED_FOR it no longer does, and sign-all is refused.
    db.session.execute(
        update(OneTimeCode)
        .where(OneTimeCode.countersign_link_id == link.id)
        .values(created_at=utcnow() - otp.RESEND_AFTER - timedelta(seconds=1))
    )
    db.session.commit()
    assert client.post(f"/countersign/{token}/code", data={"csrf_token": csrf}).status_code == 303
    run_jobs("mail")
    assert _verify(client, token, _code(smtp.of_kind("code")[-1].text()), csrf).status_code == 303
    assert "All 2 documents" in client.get(f"/countersign/{token}").get_data(as_text=True)
    verified = db.session.scalars(
        select(OneTimeCode).where(OneTimeCode.countersign_link_id == link.id, OneTimeCode.verified_at.is_not(None))
    ).one()
    assert countersign.unlocked(db.session, link=link, code_id=verified.id, now=verified.verified_at)
    assert not countersign.unlocked(
        db.session, link=link, code_id=verified.id, now=verified.verified_at + otp.VERIFIED_FOR
    )
    page = client.get(f"/countersign/{token}")
    csrf_signing = csrf_from(page)
    db.session.execute(
        update(OneTimeCode)
        .where(OneTimeCode.id == verified.id)
        .values(verified_at=utcnow() - otp.VERIFIED_FOR - timedelta(seconds=1))
    )
    db.session.commit()
    assert "Send me a code" in client.get(f"/countersign/{token}").get_data(as_text=True)
    stale = _sign_form(client, token, all="1", csrf_token=csrf_signing)
    assert stale.status_code == 403
    assert db.session.scalar(select(func.count()).select_from(CountersignRun)) == 0
    started = countersign_runs.start_run(
        db.session,
        link=link,
        listed=Listed.of([_employer(i).id for i in ids]),
        query="",
        signer_name="Anna Boss",
        signature_png=None,
        consent=True,
        ip=None,
        user_agent=None,
        now=utcnow(),
        code_id=verified.id,
    )
    assert started.status == "code_needed"
    assert {_employer(i).status for i in ids} == {"invited"}
    assert db.session.get(SigningRequest, ids[0]).status != "signed"

    # Every request of the batch purged: the link's codes go with it, their events and mails say nothing more.
    purge_requests(db.session, storage=get_storage(), request_ids=ids, now=utcnow(), reason="erasure")
    db.session.commit()
    assert not db.session.scalars(select(OneTimeCode).where(OneTimeCode.countersign_link_id.is_not(None))).all()
    events = db.session.scalars(select(Event).where(Event.request_id.is_(None), Event.type.like("code.%"))).all()
    assert events and {(e.ip, e.user_agent, str(e.details)) for e in events} == {(None, None, "{}")}
    mails = db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == otp.MAIL_KIND)).all()
    assert mails and {(m.to_email, m.subject) for m in mails} == {("", "")}
