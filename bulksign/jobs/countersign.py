"""Queue ``default``: a slice of a countersigner's "sign all", and the tick that sends due digests and queues again
the runs whose jobs died."""

from __future__ import annotations

from datetime import datetime, timedelta

from flask import current_app

from bulksign.core.extensions import db, get_redis
from bulksign.models import CountersignRun, utcnow
from bulksign.signing.countersign_runs import requeue_stalled, run_proof, sign_one, unfinished_runs
from bulksign.signing.digests import due_digests
from bulksign.work.liveness import live_jobs
from bulksign.work.pipeline import BEAT_TRUST_SECONDS, beating, enqueue_sends
from bulksign.work.queues import COUNTERSIGN_CHUNK, COUNTERSIGN_DIGESTS, job


@job(COUNTERSIGN_CHUNK)
def sign_chunk(run_id: int, party_ids: list[int]) -> dict[str, int]:
    """Sign each of these documents of the run, each its own commit (a repeat passes the signed ones by)."""
    run = db.session.get(CountersignRun, run_id)
    if run is None:
        return {}
    outcomes: dict[str, int] = {}
    proof = run_proof(db.session, run)
    # Beats tell the reconciler this job lives (a 50-document chunk with a slow database can take a minute).
    with beating():
        for party_id in party_ids:
            outcome = sign_one(db.session, run=run, party_id=party_id, now=utcnow(), proof=proof)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


@job(COUNTERSIGN_DIGESTS)
def send_due_digests(*, now: datetime) -> str:
    """Queue the countersigners' digests that are due, then queue again what is left of runs whose jobs died."""
    every = timedelta(hours=current_app.config["COUNTERSIGN_DIGEST_HOURS"])
    mail_ids = due_digests(db.session, now=now, every=every)
    enqueue_sends(mail_ids)
    runs = unfinished_runs(
        db.session, older_than=now - timedelta(seconds=current_app.config["RECONCILE_AFTER_SECONDS"])
    )
    job_ids = [job_id for run in runs for job_id in run.job_ids]
    live = live_jobs(get_redis(), job_ids, now=now, beat_trust=BEAT_TRUST_SECONDS, queue=COUNTERSIGN_CHUNK.queue)
    requeued = requeue_stalled(db.session, live=live, runs=runs, now=now)
    return f"{len(mail_ids)} digests, {len(requeued)} runs queued again"
