"""Batches whose requests stand in the given states, inserted directly (fast, no pipeline, no real template), for
state, dashboard and export tests and benchmarks; a pending batch on a real template is ``batches.make_batch``."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import insert, select

from bulksign.batches import counts as batch_counts
from bulksign.models import Batch, DocumentTemplate, SigningRequest, Team, TemplateVersion

#: ``batch_in_states``'s default team: the one the ``users`` fixture makes, if there is one.
DEFAULT = object()


def batch_in_states(
    session,
    *,
    statuses: list[str],
    now: datetime,
    name: str = "Contracts",
    user_id: int | None = None,
    batch_status: str = "processing",
    email_domain: str = "example.org",
    chunk: int = 5000,
    team_id=DEFAULT,
) -> Batch:
    """A batch whose i-th request is in ``statuses[i]``; committed. Emails are ``person<i>@<domain>``.

    Batch and template belong to ``team_id`` (default: the team named "Default", when there is one).
    """
    if team_id is DEFAULT:
        team_id = session.scalar(select(Team.id).where(Team.name == "Default"))
    template = DocumentTemplate(
        name=f"{name} template", created_by_id=user_id, created_at=now, latest_version=1, team_id=team_id
    )
    session.add(template)
    session.flush()
    version = TemplateVersion(
        template_id=template.id, version=1, html="<p>{{ name }}</p>", variables=["name"], created_at=now
    )
    session.add(version)
    session.flush()
    batch = Batch(
        name=name,
        template_version_id=version.id,
        created_by_id=user_id,
        team_id=team_id,
        status=batch_status,
        total_count=len(statuses),
        created_at=now,
        started_at=now,
    )
    session.add(batch)
    session.flush()
    rows = []
    for i, status in enumerate(statuses, start=1):
        sent = now - timedelta(minutes=10) if status not in ("pending", "generating", "generated", "sending") else None
        rows.append(
            {
                "batch_id": batch.id,
                "row_number": i + 1,
                "email": f"person{i:06d}@{email_domain}",
                "name": f"Person {i:06d}",
                "data": {"name": f"Person {i:06d}"},
                "status": status,
                "status_changed_at": now - timedelta(seconds=len(statuses) - i),
                "sent_at": sent,
                "opened_at": sent if status in ("opened", "signed", "declined") else None,
                "created_at": now,
                "token_hash": f"{batch.id:08d}{i:056d}",
                "token_nonce": "n" * 32,
                "reminder_count": 0,
                "attempts": 0,
                "error_message": "The mailbox does not exist (550 5.1.1)." if status == "bounced" else None,
            }
        )
    for start in range(0, len(rows), chunk):
        session.execute(insert(SigningRequest), rows[start : start + chunk])
    # The rows bypass batch creation: the dashboard reads the counters, so set them from the rows.
    batch_counts.rebuild(session, batch_ids=[batch.id])
    session.commit()
    return batch
