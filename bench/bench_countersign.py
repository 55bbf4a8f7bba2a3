"""A countersigner's "sign all" of 5,000 two-party documents: documents per second, the seal included.

As deployed: ``PDF_CONCURRENCY`` workers on ``pdf`` (the seals), one on ``default`` (the run's chunks, each
document through the single page's sign path), one on ``mail``; the workers start before the clock. Set-up, not
timed: a batch of N rows with a fixed ``employer`` signing in parallel with the employee, rendered and sent by the
same workers, every employee signed in-process. Timed: from the run's start (the form's one call) until every
document has its sealed copy. Also: how long the signing alone took (the last ``party.signed``), the rest being
the seals catching up.
"""

from __future__ import annotations

import os
import time

from bench import Figure, bench_app, stop_processes, wait_for_requests

CONTRACT = (
    '<!doctype html><meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">'
    "<h1>Employment contract</h1><p>Employee {{ name }} joins ACME.</p>"
    "<p>The employee: {{ signature }}</p><p>For the employer: {{ signature_employer }}</p></body>"
)


def _batch(n: int) -> int:
    from bulksign.batches.batch_settings import BatchSettings, party_settings_from_form
    from bulksign.batches.creation import create_batch
    from bulksign.core.extensions import db
    from bulksign.doc_templates.columns import needed_columns
    from bulksign.doc_templates.versions import create_template
    from bulksign.models import utcnow
    from bulksign.people.users import create_user
    from bulksign.recipients.validation import validate_recipients

    now = utcnow()
    user = create_user(db.session, email="bench@example.com", password="bench-password", role="staff", now=now)
    version = create_template(db.session, name="Employment contract", html=CONTRACT, user=user, now=now).version
    db.session.commit()
    form = {
        "parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"}}',
        "routing": '[["recipient", "employer"]]',
    }
    signers = party_settings_from_form(form, version=version)
    rows = "email,name\n" + "".join(f"e{i}@example.com,Employee {i}\n" for i in range(n))
    report = validate_recipients(
        rows.encode(),
        filename="r.csv",
        variables=needed_columns(version),
        keep_rows=True,
        **signers.file_check,
    )
    created = create_batch(
        db.session,
        user=user,
        template_version=version,
        rows=report.recipients,
        settings=BatchSettings(name="Contracts"),
        now=now,
        party_settings=signers,
    )
    return created.batch.id


def run(*, small: bool) -> list[Figure]:
    from aiosmtpd.controller import Controller
    from sqlalchemy import func, select

    from bench.bench_pipeline import _Sink, start_workers
    from bulksign.core.extensions import db
    from bulksign.models import CountersignLink, Document, Event, SigningRequest, utcnow
    from bulksign.signing.countersign import ready_page
    from bulksign.signing.countersign_runs import start_run
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import request_ids
    from tests.support.partydata import recipients_sign
    from tests.support.services import free_port
    from tests.support.signatures import png

    n = 30 if small else int(os.environ.get("BENCH_COUNTERSIGN_DOCUMENTS", "5000"))
    controller = Controller(_Sink(), hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        with bench_app(MAIL_PORT=controller.port) as app:
            concurrency = app.config["PDF_CONCURRENCY"]
            workers = start_workers(app, [("pdf",)] * concurrency + [("mail",), ("default",)])
            try:
                batch_id = _batch(n)
                enqueue_renders(request_ids(batch_id))
                wait_for_requests(
                    SigningRequest.batch_id == batch_id, total=n, goal="sent", deadline=time.monotonic() + 3600
                )
                recipients_sign(db.session, request_ids(batch_id))
                link = db.session.scalars(select(CountersignLink).where(CountersignLink.batch_id == batch_id)).one()

                started_at, started = utcnow(), time.monotonic()
                run_started = start_run(
                    db.session,
                    link=link,
                    listed=ready_page(db.session, link=link, query="", page=1, now=utcnow()).listed,
                    query="",
                    signer_name="Anna Boss",
                    signature_png=png(),
                    consent=True,
                    ip="203.0.113.9",
                    user_agent="bench",
                    now=started_at,
                )
                assert run_started.count == n, run_started
                sealed = 0
                while sealed < n and time.monotonic() - started < 3600:
                    time.sleep(0.5)
                    db.session.rollback()
                    sealed = db.session.scalar(
                        select(func.count()).select_from(Document).where(Document.kind == "signed")
                    )
                elapsed = time.monotonic() - started
                last_signed = db.session.scalar(
                    select(func.max(Event.created_at)).where(Event.type == "party.signed", Event.actor == "recipient")
                )
            finally:
                stop_processes(workers)
    finally:
        controller.stop()

    label = f"{n:,} documents" + (" (small)" if small else "")
    signing = (last_signed - started_at).total_seconds()
    return [
        Figure(
            f"sign-all docs/s, seal included, {label}, {concurrency} pdf workers + 1 default",
            sealed / elapsed,
            "docs/s",
            target=f"all {n:,} sealed",
            ok=sealed == n,
        ),
        Figure(f"sign-all, signing alone (last signature), {label}", n / max(signing, 1e-3), "docs/s"),
    ]
