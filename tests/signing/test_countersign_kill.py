"""Sign-all of 100 documents (two chunks; ``COUNTERSIGN_KILL_DOCUMENTS=1000`` for the issue's size) with the worker
SIGKILLed midway: every document ends signed once, with one ``party.signed`` event, sealed once
(``pdfsig`` validates it) with both names in its text."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.jobs.countersign import send_due_digests
from bulksign.jobs.seal import seal_missing
from bulksign.models import CountersignRun, Document, Event, Party, SigningRequest, utcnow
from bulksign.work.pipeline import BEAT_TRUST_SECONDS, enqueue_renders
from tests.signing.test_countersign import _digest_token, _digests, _sign_form
from tests.signing.test_routing import EMPLOYER, _batch
from tests.support.batches import request_ids, worker_env
from tests.support.partydata import recipients_sign
from tests.support.processes import start, stop, wait_for

#: 1,000 as the issue asks takes minutes on this shared machine (the renders and the seals, not the signing).
DOCUMENTS = int(os.environ.get("COUNTERSIGN_KILL_DOCUMENTS", "100"))


def _employer_signed() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).where(Party.role == "employer", Party.status == "signed"))


@pytest.mark.slow(seconds=100)
def test_sign_all_with_the_worker_killed_midway_signs_and_seals_each_document_once(
    app, users, client, smtp, run_jobs, tmp_path
):
    rows = "email,name\n" + "".join(f"e{i}@example.com,Employee {i}\n" for i in range(DOCUMENTS))
    form = {**EMPLOYER, "routing": '[["recipient", "employer"]]'}
    ids = request_ids(_batch(users, file=rows, form=form))
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    # Each employee signs (their step is the employer's too: the employer signs last and the seal follows).
    recipients_sign(db.session, ids)
    # The employer was invited with the render, before the requests were out: the tick sends the first digest.
    send_due_digests(now=utcnow())
    run_jobs("mail")
    token = _digest_token(_digests(smtp)[-1])

    started = _sign_form(client, token, all="1")
    assert started.status_code == 303
    worker = start(["jobs", "worker", "--burst", "default"], env=worker_env(app), log=tmp_path / "worker.log")
    try:
        wait_for(lambda: _employer_signed() >= 10, timeout=120, what="the first documents signed", every=0.02)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        stop(worker)
    at_kill = _employer_signed()
    print(f"{at_kill} of {DOCUMENTS} signed when the worker was killed")
    assert at_kill < DOCUMENTS, "the worker finished before the kill: nothing was tested"

    # The other chunks run on; the killed one is queued again by the tick once its beat is silent.
    run_jobs("default")
    (run_id,) = db.session.scalars(select(CountersignRun.id))
    later = utcnow() + timedelta(seconds=BEAT_TRUST_SECONDS + 5)
    assert send_due_digests(now=later).endswith("1 runs queued again")
    run_jobs("default", "pdf", "mail")
    assert _employer_signed() == DOCUMENTS
    assert send_due_digests(now=later + timedelta(minutes=1)).endswith("0 runs queued again")
    db.session.rollback()
    assert db.session.get(CountersignRun, run_id).finished_at is not None
    # A seal whose queueing died with the worker (between a commit and its enqueue) is the reseal tick's.
    seal_missing(now=utcnow() + timedelta(minutes=10))
    run_jobs("pdf", "mail")

    db.session.rollback()
    assert {s for (s,) in db.session.execute(select(SigningRequest.status))} == {"signed"}
    events = Counter(
        (request_id, details["role"])
        for request_id, details in db.session.execute(
            select(Event.request_id, Event.details).where(Event.type == "party.signed")
        )
    )
    assert set(events.values()) == {1} and len(events) == 2 * DOCUMENTS
    employer_events = db.session.scalars(
        select(Event).where(Event.type == "party.signed", Event.details["role"].as_string() == "employer")
    ).all()
    assert {e.ip for e in employer_events} == {"127.0.0.1"}
    signed = db.session.scalars(select(Document).where(Document.kind == "signed")).all()
    assert sorted(d.request_id for d in signed) == sorted(ids)  # sealed once each
    storage = get_storage()
    for document in signed:
        path = tmp_path / f"{document.request_id}.pdf"
        path.write_bytes(storage.get(document.storage_key))
        out = subprocess.run(["pdfsig", str(path)], capture_output=True, text=True, timeout=30).stdout
        assert out.count("Signature #") == 1 and "Signature is Valid" in out, out
        text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, timeout=30).stdout
        assert f"Employee {document.request_id}" in text and "Anna Boss" in text
