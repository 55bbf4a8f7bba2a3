"""Numbers for Prometheus, read fresh at each scrape: requests by status, queues, mails, render times, reminders.

Everything comes from the database (GROUP BY) and Redis (queue lengths), so every web process
reports the same totals and nothing is lost when a process restarts.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import CollectorRegistry
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from .models import Event, OutgoingMail, SigningRequest

#: Render durations are measured from the events of this recent window.
RENDER_WINDOW = timedelta(hours=1)
RENDER_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True)
class Snapshot:
    requests_by_status: dict[str, int]
    mails_by_kind_status: dict[tuple[str, str], int]
    queue_depths: dict[str, dict[str, int]]
    render_seconds: tuple[float, ...]


def render_durations(session: Session, *, now: datetime, limit: int = 5000) -> tuple[float, ...]:
    """Seconds between ``status.generating`` and the following ``status.generated`` of each request, recently."""
    start = aliased(Event)
    started_at = (select(func.max(start.created_at))
                  .where(start.request_id == Event.request_id, start.type == "status.generating",
                         start.created_at <= Event.created_at)
                  .correlate(Event).scalar_subquery())
    rows = session.execute(
        select(Event.created_at, started_at)
        .where(Event.type == "status.generated", Event.created_at >= now - RENDER_WINDOW)
        .order_by(Event.id.desc()).limit(limit)
    ).all()
    return tuple(max(0.0, (done - began).total_seconds()) for done, began in rows if began is not None)


def snapshot(session: Session, *, queues: dict, now: datetime) -> Snapshot:
    """Read every figure once (3 queries + one Redis round trip per queue)."""
    by_status = dict(session.execute(select(SigningRequest.status, func.count()).group_by(SigningRequest.status)).all())
    mails = {(kind, status): n for kind, status, n in session.execute(
        select(OutgoingMail.kind, OutgoingMail.status, func.count()).group_by(OutgoingMail.kind, OutgoingMail.status))}
    depths = {}
    for name, queue in queues.items():
        depths[name] = {"queued": queue.count, "started": queue.started_job_registry.count,
                        "failed": queue.failed_job_registry.count, "scheduled": queue.scheduled_job_registry.count}
    return Snapshot(requests_by_status=by_status, mails_by_kind_status=mails, queue_depths=depths,
                    render_seconds=render_durations(session, now=now))


class _SnapshotCollector:
    def __init__(self, snap: Snapshot):
        self.snap = snap

    def collect(self):
        snap = self.snap
        requests = GaugeMetricFamily("bulksign_requests", "Signing requests by current status", labels=["status"])
        for status, n in sorted(snap.requests_by_status.items()):
            requests.add_metric([status], n)
        yield requests
        depth = GaugeMetricFamily("bulksign_queue_jobs", "RQ jobs per queue and state", labels=["queue", "state"])
        for queue, states in sorted(snap.queue_depths.items()):
            for state, n in states.items():
                depth.add_metric([queue, state], n)
        yield depth
        mails = CounterMetricFamily("bulksign_mails", "Outgoing mails by kind and status", labels=["kind", "status"])
        for (kind, status), n in sorted(snap.mails_by_kind_status.items()):
            mails.add_metric([kind, status], n)
        yield mails
        reminders = CounterMetricFamily("bulksign_reminders_sent", "Reminder mails sent")
        reminders.add_metric([], snap.mails_by_kind_status.get(("reminder", "sent"), 0))
        yield reminders
        values = snap.render_seconds
        buckets = [(str(le), sum(1 for v in values if v <= le)) for le in RENDER_BUCKETS] + [("+Inf", len(values))]
        yield HistogramMetricFamily("bulksign_pdf_render_seconds",
                                    "PDF render time (generating → generated) over the last hour",
                                    buckets=buckets, sum_value=sum(values))


def registry_for(snap: Snapshot) -> CollectorRegistry:
    """A registry that exposes this snapshot (built per scrape)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snap))
    return registry
