"""Routing: a document several parties sign, each invited when its step starts, on real workers, real
mail (aiosmtpd), real PDFs; the request is signed, sealed once and mailed to every party only after the last."""

from __future__ import annotations

import io
import json
import re
import subprocess
from datetime import timedelta

from sqlalchemy import select

from bulksign.batches.batch_settings import BatchSettings, party_settings_from_form
from bulksign.batches.creation import create_batch
from bulksign.batches.manual_reminders import send_manual_reminders
from bulksign.batches.resend import resend_with_new_link
from bulksign.core.extensions import db
from bulksign.doc_templates.columns import needed_columns
from bulksign.doc_templates.versions import create_template, save_fields
from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import check_seal
from bulksign.documents.storage import get_storage
from bulksign.integrations import webhooks_out
from bulksign.jobs.routing import advance_stalled
from bulksign.jobs.webhooks import dispatch
from bulksign.models import Document, Party, SigningRequest, utcnow
from bulksign.recipients.validation import validate_recipients
from bulksign.signing import parties as signing_parties
from bulksign.signing.steps import stalled
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.queues import get_queue
from tests.support.batches import request_ids
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from

PAGE = '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">{body}</body>'
CONTRACT = PAGE.format(
    body="<h1>Employment contract</h1><p>Employee {{ name }} joins ACME.</p>"
    "<p>The employee: {{ signature }}</p><p>For the employer: {{ signature_employer }}</p>"
)
EMPLOYER = {"parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"}}'}


def _batch(
    users, *, form=EMPLOYER, file="email,name\neva@example.com,Eva Employee\n", html=CONTRACT, fields=None, **options
) -> int:
    """A batch of ``file``'s rows on a new template of ``html`` (``fields``: its fields' settings) signed by the
    parties ``form`` names; ``options``: its ``BatchSettings``."""
    version = create_template(db.session, name="Employment contract", html=html, user=users["staff"], now=utcnow())
    if fields is not None:
        version = save_fields(db.session, template=version.template, fields=fields, user=users["staff"], now=utcnow())
    db.session.commit()
    signers = party_settings_from_form(form, version=version.version)
    report = validate_recipients(
        file.encode(),
        filename="r.csv",
        variables=needed_columns(version.version),
        keep_rows=True,
        **signers.file_check,
    )
    assert not report.errors, report.errors
    created = create_batch(
        db.session,
        user=users["staff"],
        template_version=version.version,
        rows=report.recipients,
        settings=BatchSettings(name="Contracts", **options),
        now=utcnow() - timedelta(minutes=1),
        party_settings=signers,
    )
    return created.batch.id


def _sent(users, run_jobs, **batch) -> int:
    """The one request of a new batch (``_batch``), rendered and its first step invited on real workers."""
    (request_id,) = request_ids(_batch(users, **batch))
    enqueue_renders([request_id])
    run_jobs("pdf", "mail")
    return request_id


def _token(mail) -> str:
    return re.search(r"/sign/([A-Za-z0-9_-]+)", mail.text()).group(1)


def _mails_to(smtp, address: str):
    return [m for m in smtp.received if address in m.rcpt_tos]


def _sign(client, token: str, name: str):
    page = client.get(f"/sign/{token}")
    assert page.status_code == 200 and b"sign-form" in page.data, page.data[-1500:]
    data = {"csrf_token": csrf_from(page), "name": name, "consent": "yes", "signature": data_url(png())}
    return client.post(f"/sign/{token}/sign", data=data)


def _parties(request_id: int) -> dict[str, Party]:
    db.session.expire_all()
    return {p.role: p for p in db.session.scalars(select(Party).where(Party.request_id == request_id))}


def _text(pdf: bytes, tmp_path, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, timeout=30).stdout


def test_two_parties_sign_in_order_and_the_document_is_sealed_once_for_both(
    app, users, client, smtp, run_jobs, tmp_path
):
    request_id = _sent(users, run_jobs)
    # The employee is invited; the employer waits, with no link, until the employee has signed.
    assert [m.rcpt_tos for m in smtp.received] == [["eva@example.com"]]
    found = _parties(request_id)
    assert (found["recipient"].status, found["employer"].status) == ("invited", "waiting")
    assert found["employer"].token_hash is None

    assert _sign(client, _token(smtp.received[0]), "Eva Employee").status_code == 303
    found = _parties(request_id)
    assert (found["recipient"].status, found["employer"].status) == ("signed", "waiting")
    assert db.session.get(SigningRequest, request_id).status == "opened"  # not signed before the last party
    page = client.get(f"/sign/{_token(smtp.received[0])}")
    assert "The other parties sign it now" in page.get_data(as_text=True)

    run_jobs("pdf", "mail")  # the next step: the employee's signature kept in a new version, the employer invited
    (invitation,) = _mails_to(smtp, "hr@acme.example")
    assert "Anna Boss" in invitation.text()
    employer = _token(invitation)
    assert _parties(request_id)["employer"].status == "invited"
    step = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "step")).one()
    original = db.session.scalars(
        select(Document).where(Document.request_id == request_id, Document.kind == "original")
    ).one()
    assert step.sha256 != original.sha256
    read = client.get(f"/sign/{employer}/document")
    assert read.status_code == 200
    shown = _text(read.data, tmp_path, "step.pdf")  # the employer reads it signed by her, once
    assert shown.count("Signed electronically") == 1 and shown.count("Eva Employee") == 2
    assert "Signed electronically" not in _text(get_storage().get(original.storage_key), tmp_path, "original.pdf")
    assert [m.kind for m in smtp.received] == ["invitation", "party-invitation"]

    assert _sign(client, employer, "Anna Boss").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"
    run_jobs("pdf", "mail")
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    data = get_storage().get(signed.storage_key)
    assert check_seal(data, seal_key(app.config)).valid
    path = tmp_path / "signed.pdf"
    path.write_bytes(data)
    out = subprocess.run(["pdfsig", str(path)], capture_output=True, text=True, timeout=30).stdout
    assert out.count("Signature #") == 1 and "Signature is Valid" in out and "Total document signed" in out
    text = _text(data, tmp_path, "signed.txt.pdf")
    assert "Eva Employee" in text and "Anna Boss" in text
    certificate = text[text.index("Audit certificate") :]
    assert "Recipient: Eva Employee <eva@example.com>" in certificate
    assert "Employer: Anna Boss <hr@acme.example>" in certificate
    assert "Signed by Employer" in certificate and "Signed by Recipient" in certificate
    # Both get the completed PDF, now.
    for address in ("eva@example.com", "hr@acme.example"):
        attached = [
            part
            for m in _mails_to(smtp, address)
            for part in m.message.iter_attachments()
            if part.get_content_type() == "application/pdf"
        ]
        assert [a.get_content() for a in attached] == [data], address
    assert "Every party has signed" in _mails_to(smtp, "hr@acme.example")[-1].text()


def test_parallel_parties_are_invited_together_and_either_may_sign_last(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs, form={**EMPLOYER, "routing": '[["recipient", "employer"]]'})
    assert sorted(m.rcpt_tos[0] for m in smtp.received) == ["eva@example.com", "hr@acme.example"]
    assert _sign(client, _token(_mails_to(smtp, "hr@acme.example")[0]), "Anna Boss").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "sent"
    assert _sign(client, _token(_mails_to(smtp, "eva@example.com")[0]), "Eva Employee").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"
    run_jobs("pdf", "mail")
    assert len(db.session.scalars(select(Document).where(Document.kind == "signed")).all()) == 1
    assert not db.session.scalars(select(Document).where(Document.kind == "step")).all()


def test_a_role_from_the_rows_columns_and_a_fixed_one_each_sign_their_own_document(app, users, smtp, run_jobs):
    html = CONTRACT.replace("</body>", "<p>Line manager: {{ signature_manager }}</p></body>")
    file = (
        "email,name,manager_email,manager_name\n"
        "eva@example.com,Eva,mia@example.com,Mia Manager\n"
        "olga@example.com,Olga,max@example.com,Max Manager\n"
    )
    batch_id = _batch(
        users, html=html, file=file, form={**EMPLOYER, "routing": '[["recipient"], ["manager", "employer"]]'}
    )
    first, second = request_ids(batch_id)
    found = _parties(first)
    assert (found["manager"].email, found["manager"].source, found["manager"].step) == ("mia@example.com", "row", 1)
    assert (found["employer"].email, found["employer"].source, found["employer"].step) == (
        "hr@acme.example",
        "batch",
        1,
    )
    assert _parties(second)["manager"].email == "max@example.com"


def test_a_decline_at_step_two_declines_the_request_and_tells_the_employee(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs)
    employee = _token(smtp.received[0])
    _sign(client, employee, "Eva Employee")
    run_jobs("pdf", "mail")
    employer = _token(_mails_to(smtp, "hr@acme.example")[0])
    page = client.get(f"/sign/{employer}")
    answer = client.post(f"/sign/{employer}/decline", data={"csrf_token": csrf_from(page), "reason": "Wrong salary"})
    assert answer.status_code == 303
    request = db.session.get(SigningRequest, request_id)
    assert (request.status, request.decline_reason) == ("declined", "Wrong salary")
    assert _parties(request_id)["employer"].status == "declined"
    run_jobs("mail")
    (told,) = [m for m in _mails_to(smtp, "eva@example.com") if m.kind == "party-declined"]
    assert "Anna Boss" in told.text() and "Wrong salary" in told.text()
    # The owner is told who declined: the employer, not the row's recipient.
    (notice,) = [m for m in smtp.received if m.kind == "decline-notice"]
    assert "Anna Boss" in notice.subject and "Anna Boss <hr@acme.example> declined" in notice.text()
    shown = client.get(f"/sign/{employee}").get_data(as_text=True)
    assert "This document was declined" in shown and "Anna Boss" in shown and "Wrong salary" in shown
    assert "You declined to sign this document" in client.get(f"/sign/{employer}").get_data(as_text=True)
    run_jobs("pdf", "mail")
    assert not db.session.scalars(select(Document).where(Document.kind == "signed")).all()
    # A new link for the recipient alone would read as sent again beside the employer's decline: refused, named.
    mailed = len(smtp.received)
    staff = db.session.merge(users["staff"])
    resent = resend_with_new_link(db.session, request_ids=[request_id], user=staff, now=utcnow())
    db.session.commit()
    assert (resent.resent, resent.skipped) == (0, {"several_parties": 1})
    run_jobs("mail")
    assert len(smtp.received) == mailed and db.session.get(SigningRequest, request_id).status == "declined"


def test_a_party_whose_step_has_not_started_gets_a_friendly_page_and_cannot_sign(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs)
    employer = _parties(request_id)["employer"]
    token = signing_parties.issue_party_link(db.session, party=employer, secret=app.config["SECRET_KEY"], now=utcnow())
    db.session.commit()
    page = client.get(f"/sign/{token}")
    assert page.status_code == 200 and "This document is not ready for you yet" in page.get_data(as_text=True)
    assert client.get(f"/sign/{token}/document").status_code == 410
    # A form token the client holds from its other page, so the refusal is about the step, not the form.
    csrf = csrf_from(client.get(f"/sign/{_token(smtp.received[0])}"))
    refused = client.post(f"/sign/{token}/sign", data={"csrf_token": csrf, "name": "A", "consent": "yes"})
    assert (refused.status_code, refused.headers["Location"]) == (303, f"/sign/{token}")  # back to its page
    assert _parties(request_id)["employer"].status == "waiting"


def test_a_lost_next_step_job_is_queued_again_by_the_reconciler(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs)
    _sign(client, _token(smtp.received[0]), "Eva Employee")
    get_queue("pdf").empty()  # Redis lost the job
    assert advance_stalled(now=utcnow()) == 0  # within its grace the job may still be on its way
    later = utcnow() + timedelta(minutes=10)
    assert stalled(db.session, now=later) == {request_id: (1, 1)}
    assert advance_stalled(now=later) == 1
    run_jobs("pdf", "mail")
    assert _parties(request_id)["employer"].status == "invited"
    assert len(_mails_to(smtp, "hr@acme.example")) == 1
    assert stalled(db.session, now=later) == {}
    assert advance_stalled(now=later) == 0


def test_webhooks_tell_each_party_and_request_signed_only_after_the_last(app, users, client, smtp, run_jobs):
    from tests.integrations.test_webhooks_out import Receiver

    app.config["WEBHOOK_ALLOW_LOCAL"] = True
    with Receiver() as receiver:
        webhooks_out.create_endpoint(
            db.session,
            url=receiver.url,
            events=["party.signed", "party.declined", "request.signed"],
            user_id=users["admin"].id,
            now=utcnow(),
        )
        db.session.commit()
        dispatch(now=utcnow())  # the cursor: what happens from now on
        request_id = _sent(users, run_jobs)
        _sign(client, _token(smtp.received[0]), "Eva Employee")
        dispatch(now=utcnow())
        run_jobs("webhooks", "pdf", "mail")
        told = [json.loads(body) for _headers, body in receiver.received]
        assert [(t["event"], t["data"]["party"]) for t in told] == [("party.signed", {"role": "recipient"})]
        _sign(client, _token(_mails_to(smtp, "hr@acme.example")[0]), "Anna Boss")
        dispatch(now=utcnow())
        run_jobs("webhooks")
        told = [json.loads(body) for _headers, body in receiver.received]
        assert [(t["event"], t["data"]["party"]) for t in told] == [
            ("party.signed", {"role": "recipient"}),
            ("party.signed", {"role": "employer"}),
            ("request.signed", None),
        ]
        assert told[-1]["data"]["request"]["id"] == request_id


def test_a_recipient_who_signed_is_not_reminded_while_the_next_party_signs(app, users, client, smtp, run_jobs):
    from bulksign.batches.reminders import queue_due_reminders

    batch_id = _batch(users)
    other_id = _batch(users)  # a second request, not signed: it is reminded as always
    ids = [*request_ids(batch_id), *request_ids(other_id)]
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    first = next(m for m in smtp.received if m.message_id.startswith(f"<invitation-{ids[0]}-"))
    _sign(client, _token(first), "Eva Employee")
    queued = queue_due_reminders(db.session, now=utcnow() + timedelta(days=2, hours=1))
    db.session.commit()
    assert queued.queued == 1
    reminded = db.session.scalars(select(SigningRequest.id).where(SigningRequest.reminder_count > 0)).all()
    assert reminded == [ids[1]]
    # Staff's "remind all who have not signed" says the recipient who signed did, and reminds nobody of it.
    by_hand = send_manual_reminders(
        db.session, batch_id=batch_id, user=db.session.merge(users["staff"]), now=utcnow(), selector="not_signed"
    )
    assert (by_hand.queued, by_hand.skipped) == (0, {"signed": 1})


def test_the_api_takes_the_fixed_parties_and_the_routing_and_says_what_is_wrong_with_them(app, users, client):
    from bulksign.people.users import create_api_key

    version = create_template(db.session, name="Employment contract", html=CONTRACT, user=users["staff"], now=utcnow())
    secret = create_api_key(db.session, user=users["staff"], name="test", now=utcnow()).secret
    db.session.commit()

    def create(**fields):
        data = {"template_id": version.template.id, "file": (io.BytesIO(b"email,name\neva@example.com,Eva\n"), "r.csv")}
        return client.post(
            "/api/v1/batches",
            data={**data, **fields},
            headers={"Authorization": f"Bearer {secret}"},
            content_type="multipart/form-data",
        )

    refused = create()
    # Nobody signs as employer: the file check says so, naming the role.
    assert refused.status_code == 422 and "employer_email" in str(refused.json["error"]["details"])
    refused = create(**EMPLOYER, routing='[["employer"]]')
    assert refused.status_code == 422 and refused.json["error"]["details"]["field"] == "routing"
    refused = create(parties='{"boss": {"email": "b@example.com"}}')
    assert refused.status_code == 422 and refused.json["error"]["details"]["field"] == "parties"
    made = create(**EMPLOYER, routing='[["recipient", "employer"]]')
    assert made.status_code == 201, made.json
    found = db.session.scalars(select(Party).where(Party.batch_id == made.json["id"]).order_by(Party.role)).all()
    assert [(p.role, p.step, p.email, p.source) for p in found] == [
        ("employer", 0, "hr@acme.example", "batch"),
        ("recipient", 0, None, None),
    ]


def test_the_new_batch_page_asks_who_signs_each_other_role_and_carries_it_to_the_batch(app, users, client, auth):
    version = create_template(db.session, name="Employment contract", html=CONTRACT, user=users["staff"], now=utcnow())
    db.session.commit()
    template_id = version.template.id
    auth.login()
    page = client.get(f"/batches/new?template_id={template_id}")
    assert 'name="party_employer_email"' in page.get_data(as_text=True)
    preview = client.post(
        "/batches/new/validate",
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": template_id,
            "file": (io.BytesIO(b"email,name\neva@example.com,Eva\n"), "r.csv"),
            "party_employer_email": "hr@acme.example",
            "party_employer_name": "Anna Boss",
        },
    )
    html = preview.get_data(as_text=True)
    assert "Create batch with 1 valid row" in html and 'value="hr@acme.example"' in html
    carried = dict(re.findall(r'<input type="hidden" name="(party_[a-z_]+)" value="([^"]*)"', html))
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', html).group(1)
    made = client.post(
        "/batches/new",
        data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": "f1", **carried},
    )
    assert made.status_code == 303, made.get_data(as_text=True)[-2000:]
    (employer,) = db.session.scalars(select(Party).where(Party.role == "employer")).all()
    assert (employer.email, employer.name, employer.source, employer.step) == (
        "hr@acme.example",
        "Anna Boss",
        "batch",
        1,
    )


def test_the_next_step_run_twice_invites_once_and_keeps_one_version(app, users, client, smtp, run_jobs):
    from bulksign.jobs.routing import advance
    from bulksign.models import OutgoingMail

    request_id = _sent(users, run_jobs)
    _sign(client, _token(smtp.received[0]), "Eva Employee")
    get_queue("pdf").empty()
    first, second = advance(request_id), advance(request_id)
    assert (first.status, len(first.mail_ids), second.status) == ("invited", 1, "nothing")
    assert len(db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == "party_invitation")).all()) == 1
    assert len(db.session.scalars(select(Document).where(Document.kind == "step")).all()) == 1
    run_jobs("mail")
    assert len(_mails_to(smtp, "hr@acme.example")) == 1


def test_a_pdf_templates_role_fields_take_each_partys_signature(app, users, client, smtp, run_jobs, tmp_path):
    from pypdf import PdfReader

    from tests.doc_templates.test_roles import _pdf_with_fields

    source = _pdf_with_fields("signature_customer", "signature")
    version = create_template(
        db.session, name="Act", html=None, user=users["staff"], now=utcnow(), kind="pdf", file=source
    ).version
    db.session.commit()
    form = {"parties": '{"customer": {"email": "buyer@example.com", "name": "Boris Buyer"}}'}
    signers = party_settings_from_form(form, version=version)
    report = validate_recipients(
        b"email,name\neva@example.com,Eva Employee\n",
        filename="r.csv",
        variables=needed_columns(version),
        keep_rows=True,
        **signers.file_check,
    )
    batch = create_batch(
        db.session,
        user=users["staff"],
        template_version=version,
        rows=report.recipients,
        settings=BatchSettings(name="Acts"),
        now=utcnow() - timedelta(minutes=1),
        party_settings=signers,
    ).batch
    (request_id,) = request_ids(batch.id)
    enqueue_renders([request_id])
    run_jobs("pdf", "mail")
    _sign(client, _token(smtp.received[0]), "Eva Employee")
    run_jobs("pdf", "mail")
    _sign(client, _token(_mails_to(smtp, "buyer@example.com")[0]), "Boris Buyer")
    run_jobs("pdf", "mail")
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    data = get_storage().get(signed.storage_key)
    first_page = PdfReader(io.BytesIO(data)).pages[0].extract_text()
    # Both blocks on the document's own page, in their fields: no signature page was needed.
    assert "Boris Buyer" in first_page and "Eva Employee" in first_page
    assert "Signatures" not in _text(data, tmp_path, "act.pdf")


def test_the_certificate_of_a_document_several_signed_is_found_after_its_signature_page(
    app, users, client, smtp, run_jobs, tmp_path
):
    from pypdf import PdfReader

    from bulksign.documents.audit_certificate import certificate_pages
    from bulksign.documents.signature_box import SignatureBox

    html = PAGE.format(body="<h1>Employment contract</h1><p>Employee {{ name }}.</p><p>{{ signature_employer }}</p>")
    request_id = _sent(users, run_jobs, html=html)  # the recipient marks no place: the signature page holds it
    _sign(client, _token(smtp.received[0]), "Eva Employee")
    run_jobs("pdf", "mail")
    _sign(client, _token(_mails_to(smtp, "hr@acme.example")[0]), "Anna Boss")
    run_jobs("pdf", "mail")
    docs = {d.kind: d for d in db.session.scalars(select(Document).where(Document.request_id == request_id))}
    signed, original = (get_storage().get(docs[k].storage_key) for k in ("signed", "original"))
    shown = _text(signed, tmp_path, "signed.pdf")
    assert "Signatures" in shown and "Recipient" in shown
    pages = certificate_pages(  # as the API and the evidence package ask for it
        signed, original=original, box=SignatureBox.from_json(docs["original"].signature_box)
    )
    text = "".join(p.extract_text() for p in PdfReader(io.BytesIO(pages)).pages)
    assert text.startswith("Audit certificate") and "Signatures" not in text
