"""Rows of the recipients file left out of a batch: kept with it, counted, and downloadable with their reasons,
which are stored as message ids and translated for whoever downloads them."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from bulksign.core.messages import N_, N_plural, OneOf
from bulksign.core.slicing import slices
from bulksign.core.spreadsheets import csv_writer
from bulksign.models import BatchSkippedRow
from bulksign.recipients.row_checks import RowError

#: Rows per INSERT.
_CHUNK = 1000


def keep_skipped_rows(session: Session, *, batch_id: int, errors: Sequence[RowError], kept_rows: set[int]) -> int:
    """Store the rows of ``errors`` that did not become requests (not in ``kept_rows``), one per row with all its
    reasons; returns how many. The caller commits (with the batch)."""
    by_row: dict[int, dict[str, Any]] = {}
    for error in errors:
        if error.row in kept_rows:
            continue
        row = by_row.setdefault(error.row, {"batch_id": batch_id, "row_number": error.row, "cells": {}, "reasons": []})
        row["cells"] = row["cells"] or dict(error.values)
        row["reasons"].append({"column": error.column, **_stored(error.message)})
    rows = [by_row[n] for n in sorted(by_row)]
    for chunk in slices(rows, _CHUNK):
        session.execute(insert(BatchSkippedRow), chunk)
    return len(rows)


def _stored(message: N_) -> dict[str, Any]:
    """A message as JSON: its id and its values, and a count's message its plural and count too. A value that is
    itself a message is stored the same way, so "5 values", "3 columns" read in the reader's language."""
    values = {
        k: _stored(v) if isinstance(v, N_) else v.english if isinstance(v, OneOf) else v
        for k, v in message.values.items()
    }
    stored: dict[str, object] = {"msgid": message.msgid, "values": values}
    if isinstance(message, N_plural):
        stored.update(plural=message.plural, count=message.count)
    return stored


def _message(stored: dict[str, Any]) -> N_:
    """The message ``_stored`` kept (one stored before counts had plurals is a plain ``N_``)."""
    values = {k: _message(v) if isinstance(v, dict) else v for k, v in stored["values"].items()}
    if "plural" in stored:
        return N_plural(stored["msgid"], stored["plural"], stored["count"], **values)
    return N_(stored["msgid"], **values)


def skipped_rows_csv(session: Session, *, batch_id: int) -> Iterator[str]:
    """The batch's skipped rows as CSV lines (UTF-8 BOM first, for Excel): row, column, reason, then the row's cells
    under the file's own headers; every cell spreadsheet-safe. Reasons in the current locale."""
    rows = session.scalars(
        select(BatchSkippedRow).where(BatchSkippedRow.batch_id == batch_id).order_by(BatchSkippedRow.row_number)
    ).all()
    headers = list(dict.fromkeys(h for r in rows for h in r.cells))
    out = io.StringIO()
    writer = csv_writer(out)

    def line(cells: Iterable[object]) -> str:
        out.seek(0)
        out.truncate()
        writer.writerow(cells)
        return out.getvalue()

    yield "\ufeff" + line(["row", "column", "reason", *headers])
    for row in rows:
        for reason in row.reasons:
            text = str(_message(reason))
            yield line([row.row_number, reason["column"], text, *(row.cells.get(h, "") for h in headers)])
