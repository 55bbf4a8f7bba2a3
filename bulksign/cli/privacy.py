"""``flask privacy …`` (what the next purge removes, the purge now, legal holds, erasure of a person) and
``flask teams retention`` (how long a team's batches keep their documents and personal data)."""

from __future__ import annotations

from collections.abc import Callable

import click
from flask import current_app
from flask.cli import AppGroup

from bulksign.batches import retention
from bulksign.batches.erasure import LEGAL_HOLD, erase_person
from bulksign.cli.common import fail
from bulksign.cli.users import teams_cli
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, utcnow
from bulksign.people.teams import TeamError, team_by_name

privacy_cli = AppGroup("privacy", help="Retention and erasure: purges, legal holds, erasing a person.")


def _days(policy: retention.Policy) -> str:
    signed = "for ever" if policy.keep_signed_days is None else f"{policy.keep_signed_days} days after signing"
    return f"signed kept {signed}; unsigned kept {policy.keep_unsigned_days} days after they ended"


@teams_cli.command("retention")
@click.argument("name")
@click.option("--keep-signed-days", default=None, help='Days after signing to keep signed documents; "forever".')
@click.option("--keep-unsigned-days", default=None, help="Days after they ended to keep unsigned requests.")
def team_retention_command(name: str, keep_signed_days: str | None, keep_unsigned_days: str | None) -> None:
    """Show or set how long the team's batches keep their documents and personal data."""
    try:
        team = team_by_name(db.session, name=name)
    except TeamError as exc:
        fail(str(exc))
    policy = retention.team_policy(db.session, team_id=team.id)
    if keep_signed_days is None and keep_unsigned_days is None:
        click.echo(f"{team.name}: {_days(policy)}.")
        return
    try:
        signed = (
            policy.keep_signed_days
            if keep_signed_days is None
            else retention.check_days(keep_signed_days, name="--keep-signed-days", allow_forever=True)
        )
        unsigned = (
            policy.keep_unsigned_days
            if keep_unsigned_days is None
            else retention.check_days(keep_unsigned_days, name="--keep-unsigned-days")
        )
    except retention.RetentionError as exc:
        fail(str(exc))
    assert unsigned is not None  # check_days gives None only where allow_forever
    policy = retention.set_team_retention(
        db.session, team=team, keep_signed_days=signed, keep_unsigned_days=unsigned, now=utcnow()
    )
    db.session.commit()
    click.echo(f"{team.name}: {_days(policy)}.")


@privacy_cli.command("preview")
def preview_command() -> None:
    """What a purge now would remove, per batch (nothing is changed)."""
    due = retention.preview(db.session, now=utcnow())
    for batch in due:
        click.echo(f"batch {batch.batch_id} {batch.batch_name}: {batch.signed} signed, {batch.unsigned} unsigned")
    click.echo(f"{sum(b.signed + b.unsigned for b in due)} requests in {len(due)} batches are due.")


@privacy_cli.command("purge")
def purge_command() -> None:
    """Purge now what has passed its time (the hourly job does the same)."""
    result = retention.purge_due(
        db.session,
        storage=get_storage(),
        now=utcnow(),
        on_page=db.session.commit,
        upload_hours=current_app.config["UPLOAD_KEEP_HOURS"],
    )
    click.echo(
        f"Purged {result.requests} requests ({result.documents} documents, {result.files} files),"
        f" {result.skipped_rows} rows left out at creation and {result.uploads} uploaded recipients files;"
        f" webhook deliveries: {result.deliveries_emptied} emptied, {result.deliveries_rebuilt} pending rewritten."
    )


def _change_hold(batch_id: int, reason: str, *, change: Callable[..., None], said: str) -> None:
    """Place or lift the batch's hold (``change``, which checks the reason), commit, and say ``said`` of it."""
    batch = db.session.get(Batch, batch_id)
    if batch is None:
        fail(f"No batch {batch_id}.")
    try:
        change(db.session, batch_id=batch.id, reason=reason, by=None, now=utcnow())
    except retention.RetentionError as exc:
        fail(str(exc))
    db.session.commit()
    click.echo(f"Batch {batch.id} {batch.name} {said}.")


@privacy_cli.command("hold")
@click.argument("batch_id", type=int)
@click.option("--reason", required=True, help="Why (a case number): kept in the batch's events.")
def hold_command(batch_id: int, reason: str) -> None:
    """Put a batch on legal hold: nothing of it is purged or erased until the hold is lifted."""
    _change_hold(batch_id, reason, change=retention.place_hold, said="is on legal hold")


@privacy_cli.command("release")
@click.argument("batch_id", type=int)
@click.option("--reason", required=True, help="Why the hold ends: kept in the batch's events.")
def release_command(batch_id: int, reason: str) -> None:
    """Lift a batch's legal hold: the next purge takes what has passed its time."""
    _change_hold(batch_id, reason, change=retention.lift_hold, said="is no longer on legal hold")


@privacy_cli.command("erase")
@click.argument("email")
def erase_command(email: str) -> None:
    """Erase a person: every request sent to EMAIL, in every batch, unless a hold or a kept signed contract forbids."""
    erasure = erase_person(db.session, storage=get_storage(), email=email, by=None, now=utcnow())
    db.session.commit()
    for row in erasure.erased:
        click.echo(f"erased: request {row.request_id} (batch {row.batch_id} {row.batch_name}, {row.status})")
    for kept in erasure.kept:
        if kept.reason == LEGAL_HOLD:
            why = f"its batch is on legal hold: {kept.hold_reason}"
        else:
            until = "for ever" if kept.kept_until is None else f"until {kept.kept_until:%Y-%m-%d}"
            why = f"a signed contract, kept {until}"
        click.echo(f"kept: request {kept.request_id} (batch {kept.batch_id} {kept.batch_name}): {why}")
    if erasure.skipped_rows:
        click.echo(f"erased: {erasure.skipped_rows} rows left out of batches at creation")
    if erasure.uploads:
        click.echo(f"deleted: {erasure.uploads} uploaded recipients files that held the address")
    if erasure.deliveries_emptied or erasure.deliveries_rebuilt:
        click.echo(
            f"webhook deliveries: {erasure.deliveries_emptied} sent ones emptied,"
            f" {erasure.deliveries_rebuilt} pending ones rewritten without the person"
        )
    click.echo(f"{len(erasure.erased)} erased, {len(erasure.kept)} kept.")
