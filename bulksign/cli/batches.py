"""``flask batches …``: batch maintenance."""

from __future__ import annotations

import click
from flask.cli import AppGroup
from sqlalchemy import select

from bulksign.batches.counts import counters, rebuild
from bulksign.cli.common import fail
from bulksign.core.extensions import db
from bulksign.models import Batch

batches_cli = AppGroup("batches", help="Batch maintenance.")


@batches_cli.command("rebuild-counts")
@click.argument("batch_ids", nargs=-1, type=int)
def rebuild_counts_command(batch_ids: tuple[int, ...]) -> None:
    """Set the per-batch status counters from the requests (every batch by default); safe while workers run."""

    query = select(Batch.id).order_by(Batch.id)
    ids = list(db.session.scalars(query.where(Batch.id.in_(batch_ids)) if batch_ids else query))
    unknown = sorted(set(batch_ids) - set(ids))
    if unknown:
        fail(f"No batch with the id {', '.join(map(str, unknown))}.")
    differed = 0
    for start in range(0, len(ids), 100):  # short transactions: the counters of a batch are locked while rebuilt
        chunk = ids[start : start + 100]
        before = counters(db.session, chunk)
        rebuild(db.session, batch_ids=chunk)
        after = counters(db.session, chunk)
        # Approximate while workers run: a move committed between the two reads also counts as a difference.
        differed += sum(before[b] != after[b] for b in chunk)
        db.session.commit()
    click.echo(f"Rebuilt the counters of {len(ids)} batches; {differed} differed from their requests.")
