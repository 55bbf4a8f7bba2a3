"""Staff pages for batches: the list, one batch with its live progress, the recipients table, bulk actions, exports.

Counts on every page and fragment are read from the database on each request; the browser
only swaps HTML. No page shows a recipient's signing link or token.
"""
from __future__ import annotations

import logging

from flask import (Blueprint, Response, abort, current_app, flash, redirect, render_template, request,
                   stream_with_context, url_for)
from flask_babel import gettext as _
from flask_login import current_user

from .. import dashboard
from ..batches import BatchActionError, cancel_batch, cancel_requests, retry_failed
from ..dashboard import DashboardError, RecipientFilter
from ..exports import latest_export, recipients_csv, start_signed_zip
from ..extensions import db, get_queue, get_redis
from ..logs import log
from ..models import Batch, utcnow
from ..pipeline import enqueue_sends
from ..reconciler import revive_renders
from ..reminders import reminder_schedule, send_manual_reminders
from ..resend import MAX_EXTEND_DAYS, resend_with_new_link
from ..storage import StorageError, get_storage
from .reminders import skipped_text

bp = Blueprint("batches", __name__, url_prefix="/batches")
logger = logging.getLogger(__name__)

#: Bulk actions on the selected requests (ticked rows, or every row matching the filter).
BULK_ACTIONS = ("remind", "resend", "retry", "cancel")


@bp.app_template_global()
def status_label(status: str) -> str:
    return dashboard.STATUS_LABELS.get(status, status)


@bp.app_template_global()
def status_labels() -> dict[str, str]:
    """Every status word translated once, for tables that show one per row."""
    return {status: str(label) for status, label in dashboard.STATUS_LABELS.items()}


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


def _table_context(batch_id: int, flt: RecipientFilter, cursor: str | None, counts=None) -> dict:
    try:
        page = dashboard.recipients_page(db.session, batch_id=batch_id, flt=flt, cursor=cursor)
    except DashboardError as exc:
        abort(400, description=str(exc))
    return {"page": page, "flt": flt, "cursor": cursor,
            "matching": dashboard.count_matching(db.session, batch_id=batch_id, flt=flt, counts=counts)}


def _progress_context(batch: Batch, progress: dashboard.Progress) -> dict:
    rate = dashboard.throughput(db.session, batch_id=batch.id, working=progress.working, now=utcnow())
    return {"batch": batch, "progress": progress, "rate": rate}


@bp.get("/<int:batch_id>")
def detail(batch_id: int):
    view = _batch_or_404(batch_id)
    flt = _filter_from(request.args)
    return render_template(
        "batches/detail.html", schedule=["%g" % day for day in reminder_schedule(view.batch)],
        export=latest_export(db.session, batch_id=batch_id), filters=dashboard.FILTERS,
        view=view, **_progress_context(view.batch, view.progress), **_table_context(batch_id, flt, request.args.get("cursor"), view.counts),
    )


@bp.get("/<int:batch_id>/progress")
def progress(batch_id: int):
    found = dashboard.batch_progress(db.session, batch_id=batch_id)
    if found is None:
        abort(404)
    return render_template("batches/_progress.html", **_progress_context(*found))


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


def _extend_days() -> int | None:
    raw = (request.form.get("extend_days") or "").strip()
    if raw and not (raw.isdigit() and 1 <= int(raw) <= MAX_EXTEND_DAYS):
        abort(400, description=_("Extra days must be a whole number from 1 to %(n)s.", n=MAX_EXTEND_DAYS))
    return int(raw) if raw else None


def _with_skips(done: str, skipped: dict[str, int]) -> str:
    if not skipped:
        return done
    return _("%(done)s Skipped %(n)s: %(why)s.", done=done, n=sum(skipped.values()), why=skipped_text(skipped))


def _run_action(action: str, *, batch_id: int, ids: list[int], now) -> tuple[str, str]:
    """Call the domain for one bulk action, commit, enqueue the follow-up jobs; (message, flash category)."""
    user = current_user._get_current_object()
    if action == "cancel_batch":
        result = cancel_batch(db.session, batch_id=batch_id, user=user, now=now)
        db.session.commit()
        return _("The batch is cancelled: %(n)s requests stopped and their links no longer work.",
                 n=len(result.cancelled)), "success"
    if action == "cancel":
        result = cancel_requests(db.session, request_ids=ids, user=user, now=now)
        db.session.commit()
        return _("%(n)s requests cancelled; their links no longer work.", n=len(result.cancelled)), "success"
    if action == "retry":
        result = retry_failed(db.session, batch_id=batch_id, user=user, now=now, request_ids=ids)
        db.session.commit()
        revive_renders(get_redis(), list(result.retried), now=now)
        if not result.retried:
            return _("None of the selected requests had failed; nothing to retry."), "info"
        return _("%(n)s failed requests are being prepared and sent again.", n=len(result.retried)), "success"
    if action == "remind":
        result = send_manual_reminders(db.session, batch_id=batch_id, user=user, now=now, request_ids=ids)
        db.session.commit()
        enqueue_sends(result.mail_ids)
        return (_with_skips(_("%(n)s reminders queued.", n=result.queued), result.skipped),
                "success" if result.queued else "info")
    result = resend_with_new_link(db.session, request_ids=ids, user=user, now=now, extend_days=_extend_days())
    db.session.commit()
    enqueue_sends(result.mail_ids)
    return (_with_skips(_("%(n)s new links sent; the old links no longer work.", n=result.resent), result.skipped),
            "success" if result.resent else "info")


@bp.post("/<int:batch_id>/actions")
def bulk_action(batch_id: int):
    _batch_or_404(batch_id)
    action = request.form.get("action", "")
    flt = _filter_from(request.form)
    back = redirect(url_for("batches.detail", batch_id=batch_id, **flt.as_args()))
    ids: list[int] = []
    if action != "cancel_batch":
        if action not in BULK_ACTIONS:
            flash(_("Choose an action for the selected recipients."), "error")
            return back
        ids = list(dashboard.resolve_selection(
            db.session, batch_id=batch_id, request_ids=_ids_from_form(),
            select_all=request.form.get("select_all") == "1", flt=flt).request_ids)
        if not ids:
            flash(_("Select at least one recipient (tick the rows, or \"select all matching\") first."), "error")
            return back
    try:
        message, category = _run_action(action, batch_id=batch_id, ids=ids, now=utcnow())
    except BatchActionError as exc:
        db.session.rollback()
        flash(exc.message, "error")
        return back
    log(logger, logging.INFO, "bulk action", batch_id=batch_id, action=action, requests=len(ids),
        user_id=current_user.id)
    flash(message, category)
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
