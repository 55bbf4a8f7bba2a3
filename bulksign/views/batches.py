"""Staff pages for batches: the list, one batch with its live progress, the recipients table, bulk actions, exports.

Counts on every page and fragment are read from the database on each request; the browser
only swaps HTML. No page shows a recipient's signing link or token.
"""
from __future__ import annotations

import dataclasses
import importlib
import logging

from flask import (Blueprint, Response, abort, current_app, flash, redirect, render_template, request,
                   stream_with_context, url_for)
from flask_babel import gettext as _
from flask_login import current_user

from .. import dashboard
from ..dashboard import DashboardError, RecipientFilter
from ..exports import latest_export, recipients_csv, start_signed_zip
from ..extensions import db, get_queue
from ..logs import log
from ..models import Batch, utcnow
from ..storage import StorageError, get_storage

bp = Blueprint("batches", __name__, url_prefix="/batches")
logger = logging.getLogger(__name__)

#: Bulk actions on selected requests: form value → dotted path of the domain function.
BULK_ACTIONS = {
    "remind": "bulksign.reminders.send_manual_reminders",
    "resend": "bulksign.resend.resend_with_new_link",
    "cancel": "bulksign.batches.cancel_requests",
    "retry": "bulksign.batches.retry_failed",
}


@bp.app_template_global()
def status_label(status: str) -> str:
    return dashboard.STATUS_LABELS.get(status, status)


@bp.app_template_global()
def event_label(kind: str) -> str:
    return dashboard.EVENT_LABELS.get(kind, kind)


def _filter_from(args) -> RecipientFilter:
    try:
        return RecipientFilter.parse(status=args.get("status"), q=args.get("q"), sort=args.get("sort"),
                                     direction=args.get("dir"))
    except DashboardError as exc:
        abort(400, description=str(exc))


def _batch_or_404(batch_id: int) -> dashboard.BatchView:
    view = dashboard.batch_view(db.session, batch_id=batch_id)
    if view is None:
        abort(404)
    return view


@bp.get("/")
def index():
    q = request.args.get("q", "").strip()[:200]
    page = request.args.get("page", "1")
    listing = dashboard.list_batches(db.session, q=q, page=int(page) if page.isdigit() else 1)
    return render_template("batches/index.html", listing=listing, q=q,
                           can_create="uploads.new" in current_app.view_functions)


def _table_context(batch_id: int, flt: RecipientFilter, cursor: str | None) -> dict:
    try:
        page = dashboard.recipients_page(db.session, batch_id=batch_id, flt=flt, cursor=cursor)
    except DashboardError as exc:
        abort(400, description=str(exc))
    return {"page": page, "flt": flt, "cursor": cursor,
            "matching": dashboard.count_matching(db.session, batch_id=batch_id, flt=flt)}


def _progress_context(view: dashboard.BatchView) -> dict:
    rate = dashboard.throughput(db.session, batch_id=view.batch.id, working=view.progress.working, now=utcnow())
    return {"view": view, "batch": view.batch, "progress": view.progress, "rate": rate}


@bp.get("/<int:batch_id>")
def detail(batch_id: int):
    view = _batch_or_404(batch_id)
    flt = _filter_from(request.args)
    return render_template(
        "batches/detail.html", schedule=dashboard.reminder_schedule(view.batch),
        export=latest_export(db.session, batch_id=batch_id), filters=dashboard.FILTERS,
        **_progress_context(view), **_table_context(batch_id, flt, request.args.get("cursor")),
    )


@bp.get("/<int:batch_id>/progress")
def progress(batch_id: int):
    return render_template("batches/_progress.html", **_progress_context(_batch_or_404(batch_id)))


@bp.get("/<int:batch_id>/requests")
def table(batch_id: int):
    if db.session.get(Batch, batch_id) is None:
        abort(404)
    flt = _filter_from(request.args)
    return render_template("batches/_table.html", batch_id=batch_id, filters=dashboard.FILTERS,
                           **_table_context(batch_id, flt, request.args.get("cursor")))


@bp.get("/<int:batch_id>/requests/<int:request_id>")
def timeline(batch_id: int, request_id: int):
    found = dashboard.timeline(db.session, batch_id=batch_id, request_id=request_id)
    if found is None:
        abort(404)
    return render_template("batches/_timeline.html", tl=found, batch_id=batch_id)


def _ids_from_form() -> list[int]:
    ids = []
    for raw in request.form.getlist("request_ids"):
        if not raw.isdigit():
            abort(400, description=_("The selection contains an invalid row id."))
        ids.append(int(raw))
    return ids


def _domain(path: str):
    """The domain function behind a bulk action, or None while that part is not installed."""
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        return None


def _summary(result) -> str:
    """A result dataclass as "field: n" pairs, for the flash message."""
    if not dataclasses.is_dataclass(result):
        return ""
    parts = []
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        if isinstance(value, (list, tuple, set, frozenset)):
            value = len(value)
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items()) or "0"
        if isinstance(value, (int, str)):
            parts.append(f"{f.name.replace('_', ' ')}: {value}")
    return "; ".join(parts)


@bp.post("/<int:batch_id>/actions")
def bulk_action(batch_id: int):
    view = _batch_or_404(batch_id)
    action = request.form.get("action", "")
    flt = _filter_from(request.form)
    back = redirect(url_for("batches.detail", batch_id=batch_id, **flt.as_args()))
    now = utcnow()
    if action == "cancel_batch":
        func = _domain("bulksign.batches.cancel_batch")
        if func is None:
            flash(_("Cancelling a batch is not available yet."), "error")
            return back
        result = func(db.session, batch_id=batch_id, user=current_user, now=now)
    else:
        if action not in BULK_ACTIONS:
            flash(_("Choose an action for the selected recipients."), "error")
            return back
        selection = dashboard.resolve_selection(
            db.session, batch_id=batch_id, request_ids=_ids_from_form(),
            select_all=request.form.get("select_all") == "1", flt=flt)
        if not selection.request_ids:
            flash(_("Select at least one recipient (tick the rows, or \"select all matching\") first."), "error")
            return back
        func = _domain(BULK_ACTIONS[action])
        if func is None:
            flash(_("This action is not available yet."), "error")
            return back
        ids = list(selection.request_ids)
        if action == "remind":
            result = func(db.session, batch_id=batch_id, user=current_user, now=now, request_ids=ids)
        elif action == "retry":
            result = func(db.session, batch_id=batch_id, user=current_user, now=now, request_ids=ids)
        else:
            result = func(db.session, request_ids=ids, user=current_user, now=now)
    db.session.commit()
    log(logger, logging.INFO, "bulk action", batch_id=view.batch.id, action=action, user_id=current_user.id)
    flash(_("Done. %(summary)s", summary=_summary(result)), "success")
    return back


@bp.get("/<int:batch_id>/export.csv")
def export_csv(batch_id: int):
    _batch_or_404(batch_id)
    return csv_response(batch_id, _filter_from(request.args))


def csv_response(batch_id: int, flt: RecipientFilter) -> Response:
    """The filtered recipients as a streamed CSV download (also used by the API)."""
    body = stream_with_context(recipients_csv(db.session, batch_id=batch_id, flt=flt))
    return Response(body, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="batch-{batch_id}-recipients.csv"',
        "Cache-Control": "no-store"})


@bp.post("/<int:batch_id>/exports")
def start_export(batch_id: int):
    _batch_or_404(batch_id)
    started = start_signed_zip(db.session, batch_id=batch_id, user_id=current_user.id, now=utcnow())
    db.session.commit()
    if started.created:
        get_queue("default").enqueue("bulksign.jobs.exports.signed_zip", started.export.id,
                                     job_id=f"export-{started.export.id}", job_timeout=3600,
                                     result_ttl=600, failure_ttl=86400)
    if request.headers.get("HX-Request"):
        return render_template("batches/_export.html", export=started.export, batch_id=batch_id)
    flash(_("The ZIP of signed documents is being built; the download link appears on this page when it is ready."),
          "info")
    return redirect(url_for("batches.detail", batch_id=batch_id))


@bp.get("/<int:batch_id>/exports/<int:export_id>")
def export_status(batch_id: int, export_id: int):
    export = latest_export(db.session, batch_id=batch_id, export_id=export_id) or abort(404)
    return render_template("batches/_export.html", export=export, batch_id=batch_id)


@bp.get("/<int:batch_id>/exports/<int:export_id>/download")
def export_download(batch_id: int, export_id: int):
    export = latest_export(db.session, batch_id=batch_id, export_id=export_id) or abort(404)
    if export.status != "ready" or not export.storage_key:
        abort(404)
    try:
        data = get_storage().get(export.storage_key)
    except StorageError as exc:
        log(logger, logging.ERROR, "export download failed", export_id=export.id, error=str(exc))
        abort(404)
    return Response(data, mimetype="application/zip", headers={
        "Content-Disposition": f'attachment; filename="batch-{batch_id}-signed.zip"', "Cache-Control": "no-store"})
