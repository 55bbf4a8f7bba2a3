"""Routing under concurrency, on real parts (PostgreSQL through PgBouncer, real RQ workers): the parties of one step
signing at the same moment, the steps of a longer routing following one another without the reconciler, and the
reconciler finishing a request whose parties all signed."""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import func, select

from bulksign.batches.reconciler import reconcile
from bulksign.core.extensions import db, get_redis
from bulksign.jobs.periodic import expire_requests
from bulksign.models import Document, Event, Party, SigningRequest, utcnow
from bulksign.signing.parties import move_parties
from bulksign.signing.recipient_actions import open_request, sign
from bulksign.work.pipeline import enqueue_renders
from tests.signing.test_routing import CONTRACT, EMPLOYER, _batch, _mails_to, _parties, _sent, _sign, _token
from tests.support.batches import request_ids, worker_env
from tests.support.processes import start, stop, wait_for
from tests.support.races import race
from tests.support.signatures import png

PARALLEL = {**EMPLOYER, "routing": '[["recipient", "employer"]]'}


def _sealed(request_id: int) -> int:
    return db.session.scalar(select(func.count()).where(Document.request_id == request_id, Document.kind == "signed"))


def test_both_parties_of_one_step_signing_at_once_end_signed_and_sealed_once(app, users, smtp, run_jobs):
    rows = "email,name\n" + "".join(f"e{i}@example.com,Employee {i}\n" for i in range(30))
    ids = request_ids(_batch(users, file=rows, form=PARALLEL))
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    image = png()
    for request_id in ids:
        parties = _parties(request_id)
        by_caller = [parties["recipient"].id, parties["employer"].id]

        def both_sign(n: int, request_id=request_id, by_caller=by_caller) -> str:
            return sign(
                db.session,
                request_id=request_id,
                now=utcnow(),
                signer_name=f"Signer {n}",
                signature_png=image,
                consent=True,
                ip="198.51.100.7",
                user_agent="race",
                party=db.session.get(Party, by_caller[n]),
            ).status

        assert race(app, both_sign, callers=2) == {0: "signed", 1: "signed"}
    run_jobs("pdf", "mail")  # the seals; no reconciler

    db.session.expire_all()
    stuck = [i for i in ids if db.session.get(SigningRequest, i).status != "signed"]
    assert stuck == [], f"{len(stuck)} of 30 requests signed by both parties did not move to signed"
    assert {_sealed(i) for i in ids} == {1}
    # Long past every deadline, the expiry tick finds nothing to expire.
    expire_requests(now=utcnow() + timedelta(days=400))
    db.session.expire_all()
    assert {db.session.get(SigningRequest, i).status for i in ids} == {"signed"}
    assert not db.session.scalar(select(func.count()).where(Event.type == "status.expired"))


THREE_STEPS = {
    "parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"},'
    ' "director": {"email": "dir@acme.example", "name": "Dora Director"}}',
    "routing": '[["recipient"], ["employer"], ["director"]]',
}


def test_a_three_step_routing_moves_to_each_next_step_within_seconds_on_a_running_worker(
    app, users, client, smtp, run_jobs, tmp_path, caplog
):
    html = CONTRACT.replace("</body>", "<p>The director: {{ signature_director }}</p></body>")
    request_id = _sent(users, run_jobs, html=html, form=THREE_STEPS)
    log = tmp_path / "worker.log"
    worker = start(["jobs", "worker", "pdf", "mail"], env=worker_env(app), log=log)
    try:
        assert _sign(client, _token(smtp.received[0]), "Eva Employee").status_code == 303
        started = time.monotonic()
        (employer,) = wait_for(lambda: _mails_to(smtp, "hr@acme.example"), timeout=30, what="step 2 invited")
        second = time.monotonic() - started

        assert _sign(client, _token(employer), "Anna Boss").status_code == 303
        started = time.monotonic()
        wait_for(lambda: _mails_to(smtp, "dir@acme.example"), timeout=30, what="step 3 invited")
        third = time.monotonic() - started
        print(f"step 2 invited after {second:.1f} s, step 3 after {third:.1f} s")
        assert _parties(request_id)["director"].status == "invited"
    finally:
        stop(worker)
    warnings = [line for line in log.read_text().splitlines() if "WARNING" in line]
    assert warnings == [] and not [r for r in caplog.records if r.levelname == "WARNING"]


def test_the_reconciler_finishes_a_request_whose_parties_all_signed_but_which_did_not_move(
    app, users, client, smtp, run_jobs
):
    request_id = _sent(users, run_jobs, form=PARALLEL)
    now = utcnow()
    assert open_request(db.session, request_id=request_id, now=now, ip=None, user_agent=None).status == "opened"
    # Both parties signed, the request left behind (as two transactions that each read the other unsigned did).
    parties = _parties(request_id)
    assert move_parties(db.session, parties["recipient"].id, frm="opened", to="signed", now=now, signer_name="Eva")
    employer = parties["employer"].id
    assert move_parties(db.session, employer, frm="invited", to="opened", now=now)
    assert move_parties(db.session, employer, frm="opened", to="signed", now=now, signer_name="Anna Boss")
    db.session.commit()
    assert db.session.get(SigningRequest, request_id).status == "opened"

    later = now + timedelta(minutes=2)
    reconcile(db.session, redis=get_redis(), app=app, now=later, stale_after=timedelta(seconds=20))
    db.session.expire_all()
    assert db.session.get(SigningRequest, request_id).status == "signed"
    run_jobs("pdf", "mail")
    assert _sealed(request_id) == 1
    assert len(_mails_to(smtp, "eva@example.com")) == 2  # the invitation, then the confirmation with the copy
    # Once: the next pass finds nothing to finish.
    reconcile(
        db.session, redis=get_redis(), app=app, now=later + timedelta(minutes=1), stale_after=timedelta(seconds=20)
    )
    run_jobs("pdf", "mail")
    assert _sealed(request_id) == 1
