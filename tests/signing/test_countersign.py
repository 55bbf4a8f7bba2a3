"""The countersigner: one digest and one link for every document of a batch that waits on one address,
a page of exactly the documents ready, "sign all" (or a selection) as a job, a decline per document — on real
workers, real mail (aiosmtpd), real PDFs."""

from __future__ import annotations

import html
import re
import subprocess
from datetime import timedelta

from sqlalchemy import func, select, update

from bulksign.batches.retention.purge import purge_requests
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.jobs.countersign import send_due_digests
from bulksign.models import (
    Batch,
    CountersignLink,
    CountersignRun,
    Document,
    Event,
    OutgoingMail,
    Party,
    SigningRequest,
    utcnow,
)
from bulksign.people.users import create_api_key
from bulksign.signing.countersign_runs import MAX_GENERATIONS
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.queues import get_queue
from tests.signing.test_party_reminders import DAY, tick
from tests.signing.test_routing import EMPLOYER, _batch, _sign, _token
from tests.support.batches import request_ids
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from

HR = "hr@acme.example"
TWO_ROWS = "email,name\ne1@example.com,Employee 1\ne2@example.com,E 2\n"
MINUTE = timedelta(minutes=1)
ROWS = "email,name\n" + "".join(f"e{i}@example.com,Employee {i}\n" for i in range(1, 4))


def _digest_token(mail) -> str:
    return re.search(r"/countersign/([A-Za-z0-9_-]+)", mail.text()).group(1)


def _digests(smtp):
    return [m for m in smtp.of_kind("countersign-digest") if HR in m.rcpt_tos]


def _party(request_id: int, role: str = "employer") -> Party:
    db.session.expire_all()
    return db.session.scalars(select(Party).where(Party.request_id == request_id, Party.role == role)).one()


def _sent_batch(users, run_jobs, smtp, *, rows: str = ROWS) -> list[int]:
    ids = request_ids(_batch({"staff": db.session.merge(users["staff"])}, file=rows))
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    return ids


def _ready(users, client, smtp, run_jobs, *, signed: int, rows: str = ROWS) -> tuple[list[int], str]:
    """A sent batch whose first ``signed`` employees signed, the employer's next step invited: its request ids and
    the countersigner's link from the first digest."""
    ids = _sent_batch(users, run_jobs, smtp, rows=rows)
    for request_id in ids[:signed]:
        _recipient_signs(client, smtp, request_id)
    run_jobs("pdf", "mail")
    return ids, _digest_token(_digests(smtp)[0])


def _recipient_signs(client, smtp, request_id: int) -> None:
    email = db.session.get(SigningRequest, request_id).email
    (invitation,) = [m for m in smtp.of_kind("invitation") if email in m.rcpt_tos]
    assert _sign(client, _token(invitation), f"Employee {email[1]}").status_code == 303


def shown_form(page) -> dict[str, str]:
    """The hidden fields of the page's sign form, as a browser posts them (the CSRF token, what "All" lists)."""
    text = page.get_data(as_text=True)
    if 'id="sign-form"' not in text:
        return {"csrf_token": csrf_from(page)}
    form = text.split('id="sign-form"', 1)[1].split("</form>", 1)[0]
    found = re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"', form)
    return {name: html.unescape(value) for name, value in found}


def _sign_form(client, token: str, **fields):
    """The countersigner's page opened now, and its sign form posted with ``fields``."""
    page = client.get(f"/countersign/{token}")
    data = {**shown_form(page), "name": "Anna Boss", "consent": "yes", "signature": data_url(png())}
    return client.post(f"/countersign/{token}/sign", data={**data, **fields})


def test_one_digest_for_many_documents_a_page_of_only_the_ready_ones_and_the_interval(
    app, users, client, smtp, run_jobs
):
    first, second, third = _sent_batch(users, run_jobs, smtp)
    # The countersigner waits: no mail of any kind until a document is ready for them.
    assert not smtp.to(HR)
    for request_id in (first, second):
        _recipient_signs(client, smtp, request_id)
    run_jobs("pdf", "mail")  # the next step: two documents ready for the employer

    (digest,) = _digests(smtp)
    assert not smtp.of_kind("party-invitation")  # no mail per document
    # The first as soon as one document was ready; its subject and its text say how many wait when it leaves, and
    # the mail's record says what went out.
    assert digest.subject == "2 documents of “Employment contract” wait for your signature"
    assert "2 documents of “Employment contract” wait for your signature." in digest.text()
    recorded = db.session.scalars(select(OutgoingMail.subject).where(OutgoingMail.kind == "countersign_digest"))
    assert list(recorded) == [digest.subject]
    token = _digest_token(digest)
    link = db.session.scalars(select(CountersignLink)).one()
    assert token not in (link.token_hash, link.token_nonce) and link.email == HR  # only its hash is kept

    # Another batch with the same countersigner has its own link and documents, never listed on this one.
    (other,) = _sent_batch(users, run_jobs, smtp, rows="email,name\nx@example.com,Xena Other\ny@example.com,Y\n")[:1]
    _recipient_signs(client, smtp, other)
    run_jobs("pdf", "mail")
    assert len(_digests(smtp)) == 2

    page = client.get(f"/countersign/{token}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "Employee 1" in text and "Employee 2" in text
    assert "Employee 3" not in text  # its recipient has not signed: not ready for the employer
    assert "Xena Other" not in text  # another batch's
    assert "All 2 documents" in text
    # Searchable by name; a document shows its pages (with the employee's signature on them).
    found = client.get(f"/countersign/{token}?q=employee+2").get_data(as_text=True)
    assert "Employee 2" in found and "Employee 1" not in found
    party = _party(first)
    shown = client.get(f"/countersign/{token}/documents/{party.id}")
    assert shown.status_code == 200 and f"/documents/{party.id}/pages/1" in shown.get_data(as_text=True)
    image = client.get(f"/countersign/{token}/documents/{party.id}/pages/1")
    assert image.status_code == 200 and image.mimetype == "image/webp"
    # Not ready (the employee has not signed), or a guess: nothing to read.
    assert client.get(f"/countersign/{token}/documents/{_party(third).id}").status_code == 404
    assert client.get("/countersign/not-a-token").status_code == 404

    # The third document becomes ready: no digest within the interval, one after it.
    _recipient_signs(client, smtp, third)
    run_jobs("pdf", "mail")
    assert len(_digests(smtp)) == 2
    assert send_due_digests(now=utcnow()).startswith("0 digests")
    assert send_due_digests(now=utcnow() + timedelta(hours=23)).startswith("0 digests")
    assert send_due_digests(now=utcnow() + timedelta(hours=25)).startswith("1 digests")
    assert send_due_digests(now=utcnow() + timedelta(hours=26)).startswith("0 digests")  # nothing new since
    run_jobs("mail")
    later = _digests(smtp)[-1]
    assert later.subject == "3 documents of “Employment contract” wait for your signature"
    assert _digest_token(later) == token  # one personal link

    # Staff can send one now, on the batch page, whatever the interval.
    batch_id = db.session.get(SigningRequest, first).batch_id
    secret = create_api_key(db.session, user=db.session.merge(users["staff"]), name="digests", now=utcnow()).secret
    db.session.commit()
    answer = client.post(
        f"/api/v1/batches/{batch_id}/countersign-digests", headers={"Authorization": f"Bearer {secret}"}
    )
    assert answer.status_code == 202 and answer.json == {"queued": 1}
    run_jobs("mail")
    assert len(_digests(smtp)) == 4


def test_sign_a_selection_then_decline_one_each_its_own_signature_event_and_seal(
    app, users, client, smtp, run_jobs, tmp_path
):
    ids, token = _ready(users, client, smtp, run_jobs, signed=3)
    first, second, _third = (_party(i).id for i in ids)

    # Nothing ticked: said so, nothing signed.
    refused = _sign_form(client, token, all="0")
    assert refused.status_code == 422 and "Tick the documents to sign" in refused.get_data(as_text=True)
    refused = _sign_form(client, token, all="1", consent="")
    assert refused.status_code == 422 and "I agree to sign electronically" in refused.get_data(as_text=True)

    started = _sign_form(client, token, all="0", party_ids=[str(first)])
    assert started.status_code == 303
    progress = client.get(started.location)
    assert progress.status_code == 200 and "0 of 1 done" in progress.get_data(as_text=True)
    run_jobs("default", "pdf", "mail")
    partial = client.get(started.location, headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "1 document signed" in partial and "hx-get" not in partial  # finished: it stops polling

    assert (_party(ids[0]).status, _party(ids[1]).status, _party(ids[2]).status) == ("signed", "invited", "invited")
    assert db.session.get(SigningRequest, ids[0]).status == "signed"
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == ids[0], Document.kind == "signed"))
    path = tmp_path / "signed.pdf"
    path.write_bytes(get_storage().get(signed.storage_key))
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, timeout=30).stdout
    assert "Anna Boss" in text and "Employee 1" in text
    (event,) = db.session.scalars(
        select(Event).where(
            Event.request_id == ids[0], Event.type == "party.signed", Event.details["role"].as_string() == "employer"
        )
    )
    assert event.ip == "127.0.0.1"

    # A decline is per document, with a reason; the rest stay to sign.
    page = client.get(f"/countersign/{token}/documents/{second}")
    declined = client.post(
        f"/countersign/{token}/documents/{second}/decline",
        data={"csrf_token": csrf_from(page), "reason": "Wrong salary"},
    )
    assert declined.status_code == 303
    assert _party(ids[1]).status == "declined"
    request = db.session.get(SigningRequest, ids[1])
    assert (request.status, request.decline_reason) == ("declined", "Wrong salary")
    waiting, finished = client.get(f"/countersign/{token}").get_data(as_text=True).split('id="finished"')
    assert "Employee 3" in waiting and "Employee 1" not in waiting and "Employee 2" not in waiting
    assert "All 1 document" in waiting
    assert "Employee 1" in finished and "Declined by Employer: Wrong salary" in finished
    assert db.session.scalar(select(func.count()).select_from(Document).where(Document.kind == "signed")) == 1


def test_the_countersigner_gets_no_mail_per_finished_document_and_downloads_each_copy_from_the_page(
    app, users, client, smtp, run_jobs
):
    """One mail per document is what the digest spares the countersigner: neither the completed PDFs nor another
    party's declines come one by one; the page lists them, each sealed copy to download."""
    rows = "email,name\n" + "".join(f"e{i}@example.com,Employee {i}\n" for i in range(1, 5))
    ids = request_ids(
        _batch(
            {"staff": db.session.merge(users["staff"])},
            file=rows,
            form={**EMPLOYER, "routing": '[["recipient", "employer"]]'},
        )
    )
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    for request_id in ids[:3]:
        _recipient_signs(client, smtp, request_id)
    employee_4 = db.session.get(SigningRequest, ids[3]).email
    (invitation,) = [m for m in smtp.of_kind("invitation") if employee_4 in m.rcpt_tos]
    page = client.get(f"/sign/{_token(invitation)}")
    assert (
        client.post(
            f"/sign/{_token(invitation)}/decline", data={"csrf_token": csrf_from(page), "reason": "Wrong name"}
        ).status_code
        == 303
    )
    # The employer was invited with the render, before the requests were out: the tick sends the first digest.
    send_due_digests(now=utcnow())
    run_jobs("pdf", "mail")
    token = _digest_token(_digests(smtp)[0])
    assert _sign_form(client, token, all="1").status_code == 303
    run_jobs("default", "pdf", "mail")

    assert {db.session.get(SigningRequest, i).status for i in ids} == {"signed", "declined"}
    assert [m.kind for m in smtp.to(HR)] == ["countersign-digest"]
    assert len([m for m in smtp.of_kind("confirmation") if m.rcpt_tos[0].startswith("e")]) == 3

    html = client.get(f"/countersign/{token}").get_data(as_text=True)
    assert "No document waits for your signature now." in html
    assert "4 finished documents" in html and "Declined by Employee 4: Wrong name" in html
    assert "Signed by everyone and sealed" in html
    for request_id in ids[:3]:
        party = _party(request_id)
        (sealed,) = db.session.scalars(
            select(Document).where(Document.request_id == request_id, Document.kind == "signed")
        )
        assert f"/countersign/{token}/signed/{party.id}" in html
        copy = client.get(f"/countersign/{token}/signed/{party.id}")
        assert copy.status_code == 200 and copy.mimetype == "application/pdf"
        assert copy.data == get_storage().get(sealed.storage_key)
        assert "attachment" in copy.headers["Content-Disposition"]
    # Not a signed document of this link: the declined one, the recipient's own party, an unknown id.
    recipient_party = _party(ids[0], "recipient")
    for party_id in (_party(ids[3]).id, recipient_party.id, 10**9):
        assert client.get(f"/countersign/{token}/signed/{party_id}").status_code == 404
    assert client.get(f"/countersign/not-a-token/signed/{_party(ids[0]).id}").status_code == 404


def test_a_document_whose_role_fills_fields_is_signed_on_its_own_page_and_staff_send_the_digest_now(
    app, users, client, auth, smtp, run_jobs
):
    ids, token = _ready(users, client, smtp, run_jobs, signed=2)
    # The template gives the employer a field to fill: no bulk signature for its documents.
    request = db.session.get(SigningRequest, ids[0])
    request.batch.template_version.fields = [{"name": "start_date", "type": "date", "role": "employer"}]
    db.session.commit()

    page = client.get(f"/countersign/{token}")
    text = page.get_data(as_text=True)
    assert text.count(">Fill in and sign</button>") == 2 and 'name="party_ids"' not in text and "sign-form" not in text
    assert _sign_form(client, token, all="1").status_code == 409  # nothing to sign in bulk
    assert _party(ids[0]).status == "invited"
    opened = client.post(
        f"/countersign/{token}/documents/{_party(ids[0]).id}/open", data={"csrf_token": csrf_from(page)}
    )
    assert opened.status_code == 303 and "/sign/" in opened.location
    own = client.get(opened.location)
    assert own.status_code == 200 and "sign-form" in own.get_data(as_text=True)
    assert (
        client.post(  # its own link, kept: the same page again
            f"/countersign/{token}/documents/{_party(ids[0]).id}/open", data={"csrf_token": csrf_from(page)}
        ).location
        == opened.location
    )

    # Staff: "Send the countersigners' digest now" on the batch page.
    auth.login()
    batch_id = request.batch_id
    detail = client.get(f"/batches/{batch_id}")
    assert "Send the countersigners’ digest now" in detail.get_data(as_text=True)
    sent = client.post(f"/batches/{batch_id}/countersign-digests", data={"csrf_token": csrf_from(detail)})
    assert sent.status_code == 302
    run_jobs("mail")
    assert len(_digests(smtp)) == 2


def test_when_the_batch_s_requests_are_purged_its_countersigners_link_runs_and_digest_addresses_go(
    app, users, client, smtp, run_jobs
):
    ids, token = _ready(users, client, smtp, run_jobs, signed=2)
    assert _sign_form(client, token, all="0", party_ids=[str(_party(ids[0]).id)]).status_code == 303

    purge_requests(db.session, storage=get_storage(), request_ids=ids[:2], now=utcnow(), reason="erasure")
    db.session.commit()
    assert client.get(f"/countersign/{token}").status_code == 200  # a request of the batch is left

    purge_requests(db.session, storage=get_storage(), request_ids=ids[2:], now=utcnow(), reason="erasure")
    db.session.commit()
    assert client.get(f"/countersign/{token}").status_code == 404
    assert db.session.scalar(select(func.count()).select_from(CountersignRun)) == 0
    digests = db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == "countersign_digest")).all()
    assert digests and {(m.to_email, m.subject) for m in digests} == {("", "")}


def test_a_run_whose_jobs_keep_dying_is_queued_again_a_few_times_then_given_up_and_its_documents_stay_to_sign(
    app, users, client, smtp, run_jobs
):
    ids, token = _ready(users, client, smtp, run_jobs, signed=2, rows=TWO_ROWS)
    assert _sign_form(client, token, all="1").status_code == 303
    get_queue("default").empty()  # its jobs lost
    later = utcnow() + timedelta(minutes=1)
    for _ in range(MAX_GENERATIONS):
        assert send_due_digests(now=later).endswith("1 runs queued again")
        get_queue("default").empty()
    assert send_due_digests(now=later).endswith("0 runs queued again")
    db.session.expire_all()
    assert db.session.scalars(select(CountersignRun)).one().finished_at is not None
    assert "All 2 documents" in client.get(f"/countersign/{token}").get_data(as_text=True)


def test_a_countersigner_who_opened_a_documents_own_page_is_reminded_by_the_digest_not_per_document(
    app, users, client, smtp, run_jobs
):
    ids, token = _ready(users, client, smtp, run_jobs, signed=2, rows=TWO_ROWS)  # every employee signed
    request = db.session.get(SigningRequest, ids[0])
    batch_id = request.batch_id
    request.batch.template_version.fields = [{"name": "start_date", "type": "date", "role": "employer"}]
    db.session.commit()
    page = client.get(f"/countersign/{token}")
    opened = client.post(
        f"/countersign/{token}/documents/{_party(ids[0]).id}/open", data={"csrf_token": csrf_from(page)}
    )
    assert opened.status_code == 303 and _party(ids[0]).token_hash is not None  # a link of its own now
    invited = _party(ids[1]).invited_at

    # Day 2 of the batch's schedule: one digest again, with the same link, and no mail per document.
    assert tick(invited + DAY) == 0
    assert tick(invited + 2 * DAY + MINUTE) == 1
    assert tick(invited + 2 * DAY + 2 * MINUTE) == 0  # once
    run_jobs("mail")
    assert smtp.of_kind("party-reminder") == []
    _first, again = _digests(smtp)
    assert _digest_token(again) == token
    assert again.subject == "2 documents of “Employment contract” wait for your signature"
    assert _party(ids[0]).reminder_count == 0

    # Day 4, in the batch's quiet hours: held until they end.
    due = invited + 4 * DAY + MINUTE
    db.session.execute(
        update(Batch)
        .where(Batch.id == batch_id)
        .values(quiet_hours_start=due.hour, quiet_hours_end=(due.hour + 1) % 24, timezone="UTC")
    )
    db.session.commit()
    assert tick(due) == 0
    assert tick(due.replace(minute=0, second=0) + timedelta(hours=1)) == 1
    # The schedule's two reminders given, the countersigner is not mailed again until more documents arrive.
    assert tick(invited + 9 * DAY) == 0
    run_jobs("mail")
    assert len(_digests(smtp)) == 3 and smtp.of_kind("party-reminder") == []
