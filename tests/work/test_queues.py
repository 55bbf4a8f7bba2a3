"""Every job is reached through a handle in ``bulksign.work.queues``; every mail kind has its builder, in every sender."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest
from rq.job import Job

from bulksign.core.extensions import get_redis
from bulksign.jobs.schedule import PERIODIC_JOBS
from bulksign.work import queues
from bulksign.work.queues import SEAL, WiringError, job, load_jobs

#: What RQ keeps in Redis for every job queued so far: a rename must keep these working while old jobs drain.
STORED_PATHS = {
    "bulksign.jobs.pdf.render_many",
    "bulksign.jobs.mail.send_many",
    "bulksign.jobs.seal.seal",
    "bulksign.jobs.countersign.sign_chunk",
    "bulksign.jobs.countersign.send_due_digests",
    "bulksign.jobs.sms.send_code",
    "bulksign.jobs.batches.enqueue_renders",
    "bulksign.jobs.webhooks.deliver",
    "bulksign.jobs.exports.signed_zip",
    "bulksign.jobs.bulk.apply_to_filter",
    "bulksign.jobs.bulk.apply_to_ids",
    "bulksign.jobs.periodic.run_periodic",
    "bulksign.jobs.periodic.rollup_batches",
    "bulksign.jobs.webhooks.dispatch",
    "bulksign.jobs.periodic.reconcile_stuck_work",
    "bulksign.jobs.periodic.expire_requests",
    "bulksign.jobs.periodic.send_due_reminders",
    "bulksign.jobs.seal.seal_missing",
    "bulksign.jobs.periodic.purge_idempotency_keys",
    "bulksign.jobs.retention.purge_retention",
    "bulksign.jobs.word_check.check",
}
#: The scheduler's ids: the same ids after a release, or every scheduler re-registers and doubles its jobs.
PERIODIC_IDS = {
    "periodic-batch-rollup-a0689d14f2",
    "periodic-webhooks-13e62b9dad",
    "periodic-reconcile-d69f4f51d3",  # every 30 s (was 60)
    "periodic-expiry-acf830e609",
    "periodic-reminders-fb98a86389",
    "periodic-countersign-3b27cf198e",
    "periodic-reseal-b00c70f934",
    "periodic-idempotency-keys-2d97f8c38b",
    "periodic-retention-0d90b3825c",
}
#: The kinds of mail rows the database may hold: each needs its builder in the worker that sends it.
MAIL_KINDS = {
    "invitation",
    "correction_notice",
    "confirmation",
    "decline_notice",
    "reminder",
    "expiry_summary",
    "completion_notice",
    "all_signed_notice",
    "one_time_code",
    "password_reset",
    "approval_rejected",
    "approval_requested",
    "party_invitation",
    "party_declined",
    "party_completed",
    "party_reminder",
    "countersign_digest",
    "cancelled",
    "cancelled_countersign",
    "link_again",
}


def test_every_handle_resolves_to_the_function_its_path_names():
    load_jobs()
    assert {handle.path for handle in queues.HANDLES} >= STORED_PATHS
    for handle in queues.HANDLES:
        module, _, name = handle.path.rpartition(".")
        assert getattr(importlib.import_module(module), name) is handle.func, handle.path


def test_a_renamed_job_fails_at_import_and_a_lost_one_at_start(monkeypatch):
    with pytest.raises(WiringError, match="keep the old name"):

        @job(SEAL)
        def seal_renamed(request_id: int) -> None:
            """Stands for ``jobs/seal.seal`` after a rename."""

    monkeypatch.setattr(queues, "HANDLES", [*queues.HANDLES, queues.JobHandle("bulksign.jobs.seal.gone", "pdf")])
    with pytest.raises(WiringError, match="bulksign.jobs.seal.gone"):
        load_jobs()


def test_every_periodic_job_points_at_a_handle_that_takes_the_time():
    load_jobs()
    assert {periodic.job_id for periodic in PERIODIC_JOBS} == PERIODIC_IDS
    for periodic in PERIODIC_JOBS:
        assert queues.by_path(periodic.handle.path) is periodic.handle
        assert "now" in inspect.signature(periodic.handle.func).parameters, periodic.name


def test_a_handle_queues_its_dotted_path_under_its_job_id(app):
    assert SEAL.enqueue_unique([5, 6]) == 2 and SEAL.enqueue_unique([5]) == 0
    stored = Job.fetch(SEAL.job_id(id=5), connection=get_redis())
    assert (stored.func_name, stored.args, stored.origin) == ("bulksign.jobs.seal.seal", (5,), "pdf")


def test_every_mail_kind_has_its_builder_wherever_mail_is_sent():
    # A fresh process that imports only the sender, then everything else: no builder may live outside it.
    script = """
import importlib, pkgutil, bulksign
from bulksign.mail import mailer
from bulksign.batches import sending
sender, texts = dict(mailer.BUILDERS), dict(mailer.TEXT_BUILDERS)
for info in pkgutil.walk_packages(bulksign.__path__, "bulksign."):
    importlib.import_module(info.name)
assert mailer.BUILDERS == sender, set(mailer.BUILDERS) - set(sender)
assert mailer.TEXT_BUILDERS == texts, set(mailer.TEXT_BUILDERS) - set(texts)
modules = {b.__module__ for b in [*sender.values(), *texts.values()]}
assert modules == {m.__name__ for m in sending.BUILDER_MODULES}
print(" ".join(sorted(sender)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == MAIL_KINDS


@pytest.mark.parametrize("listens_on", [("pdf", "default"), ("mail", "default", "webhooks")])
def test_the_reconciler_runs_ahead_of_a_batchs_backlog(app, listens_on):
    """Workers are deployed on ``pdf default`` and ``mail default webhooks``: with a batch's chunks waiting on
    the first queue, RQ took ``default`` (the reconciler, expiry, reminders) only once that queue ran dry."""
    from tests.support.workers import run_burst_worker

    backlog = queues.get_queue(listens_on[0])
    for n in range(5):
        backlog.enqueue("bulksign.jobs.periodic.run_periodic", f"backlog-{n}", job_id=f"backlog-{n}")
    reconcile = queues.get_queue("default").enqueue(
        "bulksign.jobs.periodic.run_periodic", queues.RECONCILE.path, job_id="reconcile-now"
    )
    run_burst_worker(*listens_on, max_jobs=1)
    assert reconcile.get_status(refresh=True) == "finished"
    assert backlog.count == 5
