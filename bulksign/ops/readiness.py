"""Readiness: is this deployment doing its work, not only alive? (``/readyz``; ``/healthz`` stays liveness.)
More in docs/architecture/ops.md."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from redis import Redis
from rq import Queue
from rq.worker_registration import get_keys

from bulksign.mail.mail_server import TOO_LONG as MAIL_SERVER_DOWN_TOO_LONG
from bulksign.mail.mail_server import Outage, current_outage
from bulksign.work.scheduler_ticks import last_tick

#: The scheduler counts as stopped when it has not ticked for this long.
SCHEDULER_STALE_AFTER = timedelta(minutes=3)


@dataclass(frozen=True)
class Readiness:
    #: What stops the deployment from working, in words; empty when ready.
    problems: tuple[str, ...]
    #: When the scheduler last ticked (None: never, or Redis lost the record).
    scheduler_tick: datetime | None
    #: Queue name → (jobs waiting, live workers listening).
    queues: dict[str, tuple[int, int]]
    #: The mail server's outage the workers noted (None: it was reached, or nobody tried since it came back).
    mail_server_outage: Outage | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def check_readiness(*, redis: Redis, queue_names: tuple[str, ...], now: datetime) -> Readiness:
    """Ask Redis about the scheduler and the workers of each queue (Redis must answer)."""
    tick = last_tick(redis)
    problems = []
    if tick is None:
        problems.append("the scheduler has not ticked yet (is `flask jobs scheduler` running?)")
    elif now - tick > SCHEDULER_STALE_AFTER:
        problems.append(f"the scheduler has not ticked for {int((now - tick).total_seconds())} s")
    queues = {}
    for name in queue_names:
        keys = sorted(get_keys(queue=Queue(name, connection=redis)))
        with redis.pipeline(transaction=False) as pipe:
            pipe.llen(f"rq:queue:{name}")
            for key in keys:
                pipe.exists(key)
            waiting, *alive = pipe.execute()
        queues[name] = (waiting, sum(alive))
        if waiting and not sum(alive):
            problems.append(f"{waiting} jobs wait in queue {name} and no worker listens on it")
    outage = current_outage(redis)
    if outage is not None and now - outage.since >= MAIL_SERVER_DOWN_TOO_LONG:
        problems.append(
            f"the mail server has not been reachable for {int((now - outage.since).total_seconds())} s; "
            f"mails wait for it: {outage.reason}"
        )
    return Readiness(tuple(problems), tick, queues, outage)
