"""The dashboard: the list of batches, one batch with its live progress, the recipients table, bulk actions, exports.

Counts on every page and fragment are read from the database on each request; the browser
only swaps HTML. No page shows a recipient's signing link or token.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    stream_with_context,
    url_for,
)
from flask_babel import get_locale, ngettext
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_login import current_user

from bulksign.batches import dashboard, field_values, party_progress, recipients_table, texting, versions
from bulksign.batches import timeline as request_timeline
from bulksign.batches.bulk_actions import BulkOutcome, act_on_selection
from bulksign.batches.exports import latest_export, start_signed_zip
from bulksign.batches.progress import BatchActionError, cancel_reason
from bulksign.batches.recipients_table import DashboardError, RecipientFilter
from bulksign.batches.reminders import reminder_schedule
from bulksign.batches.retention import EXPORT_PURGED
from bulksign.batches.retention.periods import policies
from bulksign.batches.skipped_rows import skipped_rows_csv
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import Batch, utcnow
from bulksign.models.batches import Reach
from bulksign.views._downloads import csv_response, signer_attachment
from bulksign.views._forms import extend_days_field
from bulksign.views._live import live_tag, tagged, unchanged
from bulksign.views._results import background_message, reminders_done, resend_done
from bulksign.work.queues import SIGNED_ZIP

# Named after its URLs (/batches/…): templates and redirects call its endpoints ``batches.*``.
bp = Blueprint("batches", __name__, url_prefix="/batches")
logger = logging.getLogger(__name__)


@bp.app_template_global()
def status_label(status: str) -> str:
    return dashboard.STATUS_LABELS.get(status, status)


@bp.app_template_global()
def status_labels() -> dict[str, str]:
    """Every status word translated once, for tables that show one per row."""
    return {status: str(label) for status, label in dashboard.STATUS_LABELS.items()}


@bp.app_template_global()
def party_labels() -> dict[str, str]:
    """Every party state translated once, for the table's rows."""
    return {status: str(label) for status, label in party_progress.PARTY_STATUS_LABELS.items()}


@bp.app_template_global()
def role_label(role: str, batch_id: int | None = None) -> str:
    """A party of the batch as staff read it: its label on the batch's template, in the page's language."""
    # Read once per page: a table names the parties of every row.
    versions = g.setdefault("party_versions", {})
    if batch_id not in versions:
        batch = db.session.get(Batch, batch_id) if batch_id is not None else None
        versions[batch_id] = batch.template_version if batch is not None else None
    return str(party_progress.role_label(role, version=versions[batch_id]))


@bp.app_template_global()
def export_purged(export) -> bool:
    """Whether an export (the ZIP, the evidence package) failed only because the retention rules deleted it."""
    return export.error == EXPORT_PURGED


@bp.app_template_global()
def event_label(kind: str) -> str:
    return request_timeline.EVENT_LABELS.get(kind, kind)


def _filter_from(args) -> RecipientFilter:
    try:
        return RecipientFilter.parse(
            status=args.get("status"),
            q=args.get("q"),
            sort=args.get("sort"),
            direction=args.get("dir"),
            waiting_for=args.get("waiting_for"),
        )
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
    listing = dashboard.list_batches(db.session, user=current_user, q=q, page=int(page) if page.isdigit() else 1)
    return render_template(
        "batches/index.html", listing=listing, q=q, can_create="uploads.new" in current_app.view_functions
    )


def _detail_url(batch_id: int, flt: RecipientFilter, cursor: str | None = None) -> str:
    """The batch page showing the table as ``flt`` filters and sorts it (at ``cursor``'s page)."""
    args: dict[str, Any] = {**flt.as_args(), **({"cursor": cursor} if cursor else {})}
    return url_for("batches.detail", batch_id=batch_id, **args)


def _table_context(batch_id: int, flt: RecipientFilter, cursor: str | None, counts=None, roles=None) -> dict:
    try:
        page = recipients_table.recipients_page(db.session, batch_id=batch_id, flt=flt, cursor=cursor)
    except DashboardError as exc:
        abort(400, description=str(exc))
    roles = party_progress.batch_roles(db.session, batch_id=batch_id) if roles is None else roles
    return {
        "page": page,
        "flt": flt,
        "cursor": cursor,
        "matching": recipients_table.count_matching(db.session, batch_id=batch_id, flt=flt, counts=counts),
        "roles": roles,
        "row_parties": _row_parties(batch_id, roles, [r.id for r in page.items]),
        "row_texts": texting.text_states(db.session, request_ids=[r.id for r in page.items]),
        **_fields_context(batch_id, [r.id for r in page.items]),
    }


def _fields_context(batch_id: int, request_ids: list[int]) -> dict:
    """The fields the batch's signers fill, and what the rows' signers filled in (none read for a batch without)."""
    found = field_values.batch_fields(db.session, batch_id=batch_id)
    if not found.fields:
        return {"fields": (), "row_fields": {}}
    # Formatted for the reader (an English page writes a Russian batch's dates in English).
    given = field_values.given_values(
        db.session, batch_id=batch_id, request_ids=request_ids, fields=found, language=str(get_locale())
    )
    return {"fields": found.fields, "row_fields": given}


def _row_parties(batch_id: int, roles, request_ids: list[int]) -> dict:
    """The rows' parties, for a batch with parties besides the recipient (a single-signer one shows none)."""
    if not roles:
        return {}
    return party_progress.row_parties(db.session, batch_id=batch_id, request_ids=request_ids)


def _progress_context(batch: Batch, progress: dashboard.Progress, parties: party_progress.BatchParties) -> dict:
    rate = dashboard.throughput(db.session, batch=batch, working=progress.working, now=utcnow())
    return {"batch": batch, "progress": progress, "rate": rate, "parties": parties}


@bp.app_template_global()
def phase_label(phase: dashboard.Phase) -> str:
    """A batch's phase in the words staff use."""
    if phase.key == "closed_unsigned":
        return ngettext("closed with %(num)s unsigned", "closed with %(num)s unsigned", phase.count)
    if phase.key == "partly_failed":
        return ngettext("partly failed (%(num)s)", "partly failed (%(num)s)", phase.count)
    return str(PHASE_WORDS[phase.key])


#: Words of the phases without a count.
PHASE_WORDS = {
    "sending": _l("sending"),
    "waiting": _l("waiting for signatures"),
    "all_signed": _l("all signed"),
    "cancelled": _l("cancelled"),
    "awaiting_approval": _l("waiting for approval"),
    "rejected": _l("rejected"),
}


def _shown_ids() -> list[int]:
    """The recipients table's rows on screen (the poll sends them), so their cells follow the bar."""
    return [int(v) for v in request.args.getlist("shown")[: recipients_table.MAX_PAGE_SIZE] if v.isdigit()]


@bp.get("/<int:batch_id>")
def detail(batch_id: int):
    view = _batch_or_404(batch_id)
    flt = _filter_from(request.args)
    parties = party_progress.batch_parties(db.session, batch_id=batch_id)
    return render_template(
        "batches/detail.html",
        schedule=[f"{day:g}" for day in reminder_schedule(view.batch)],
        export=latest_export(db.session, batch_id=batch_id),
        filters=recipients_table.FILTERS,
        view=view,
        retention=policies(db.session, [batch_id])[batch_id],
        reach_label=texting.REACH_LABELS[Reach(view.batch.channel)],
        **_progress_context(view.batch, view.progress, parties),
        **_table_context(batch_id, flt, request.args.get("cursor"), view.counts, parties.roles),
    )


@bp.get("/<int:batch_id>/progress")
def progress(batch_id: int):
    # The batch's version first: while it stands, the browser keeps what it shows and nothing else is read.
    tag = live_tag(versions.version_of(db.session, batch_id=batch_id))
    if (same := unchanged(tag)) is not None:
        return same
    found = dashboard.batch_progress(db.session, batch_id=batch_id)
    if found is None:
        abort(404)
    # Only the rows on screen are re-read: their status cells are swapped in place (selection and scroll stay).
    rows = recipients_table.rows_by_id(db.session, batch_id=batch_id, request_ids=_shown_ids())
    parties = party_progress.batch_parties(db.session, batch_id=batch_id)
    html = render_template(
        "batches/_progress.html",
        rows=rows,
        row_parties=_row_parties(batch_id, parties.roles, [r.id for r in rows]),
        etag=tag,
        **_fields_context(batch_id, [r.id for r in rows]),
        **_progress_context(*found, parties),
    )
    return tagged(html, tag)


@bp.get("/<int:batch_id>/requests")
def table(batch_id: int):
    if db.session.get(Batch, batch_id) is None:
        abort(404)
    flt = _filter_from(request.args)
    cursor = request.args.get("cursor")
    html = render_template(
        "batches/_table.html",
        batch_id=batch_id,
        filters=recipients_table.FILTERS,
        **_table_context(batch_id, flt, cursor),
    )
    # The address bar follows the filter, sort and page: a reload, a bookmark or "back" shows the same table.
    page_url = _detail_url(batch_id, flt, cursor)
    return html, {"HX-Push-Url": page_url}


@bp.get("/<int:batch_id>/requests/<int:request_id>")
def timeline(batch_id: int, request_id: int):
    tag = live_tag(versions.version_of(db.session, batch_id=batch_id))
    if (same := unchanged(tag)) is not None:
        return same
    found = request_timeline.timeline(db.session, batch_id=batch_id, request_id=request_id, language=str(get_locale()))
    if found is None:
        abort(404)
    return tagged(render_template("batches/_timeline.html", tl=found, batch_id=batch_id, etag=tag), tag)


@bp.get("/<int:batch_id>/requests/<int:request_id>/attachments/<name>")
def attachment(batch_id: int, request_id: int, name: str):
    """A file a signer attached: for whoever sees the batch (``reach`` answered 404 to anyone else)."""
    found = field_values.attachment_of(db.session, batch_id=batch_id, request_id=request_id, name=name) or abort(404)
    try:
        data = get_storage().get(found.storage_key)
    except StorageError as exc:
        log(logger, logging.ERROR, "attachment missing from storage", request_id=request_id, error=str(exc))
        abort(404)
    return signer_attachment(found, data)


def _ids_from_form() -> list[int]:
    ids = []
    for raw in request.form.getlist("request_ids"):
        if not raw.isdigit():
            abort(400, description=_("The selection contains an invalid row id."))
        ids.append(int(raw))
    return ids


def _message(outcome: BulkOutcome, batch: Batch) -> tuple[str, str]:
    """What a finished bulk action tells the user, and the flash category."""
    n = outcome.done
    if outcome.in_background:
        return background_message(outcome.in_background), "info"
    if outcome.action == "cancel_batch":
        return ngettext(
            "The batch is cancelled: %(num)s request stopped and its link no longer works.",
            "The batch is cancelled: %(num)s requests stopped and their links no longer work.",
            n,
        ), "success"
    if outcome.action == "cancel":
        return ngettext(
            "%(num)s request cancelled; its link no longer works.",
            "%(num)s requests cancelled; their links no longer work.",
            n,
        ), "success"
    if outcome.action == "retry":
        if not n:
            return _("None of the selected requests had failed; nothing to retry."), "info"
        return ngettext(
            "%(num)s failed request is being prepared and sent again.",
            "%(num)s failed requests are being prepared and sent again.",
            n,
        ), "success"
    if outcome.action == "remind":
        message, category, offer = reminders_done(n, outcome.skipped)
        if offer:
            message += " " + _('To remind them now anyway, tick "Send anyway" and apply again.')
        return message, category
    return resend_done(
        n, outcome.skipped, deadlines=outcome.deadlines, batch=batch, still_bounced=outcome.still_bounced
    )


@bp.post("/<int:batch_id>/actions")
def bulk_action(batch_id: int):
    view = _batch_or_404(batch_id)
    action = request.form.get("action", "")
    flt = _filter_from(request.form)
    back = redirect(_detail_url(batch_id, flt))
    try:
        reason = cancel_reason(request.form.get("reason")) if action in ("cancel", "cancel_batch") else None
        done = act_on_selection(
            db.session,
            action=action,
            batch_id=batch_id,
            request_ids=_ids_from_form(),
            select_all=request.form.get("select_all") == "1",
            flt=flt,
            user=current_user._get_current_object(),
            now=utcnow(),
            extend_days=extend_days_field(),
            force=request.form.get("force") == "1",
            reason=reason,
        )
    except BatchActionError as exc:
        flash(str(exc.message), "error")
        return back
    if done.outcome is None:
        flash(background_message(done.queued), "info")
    else:
        flash(*_message(done.outcome, view.batch))
    return back


@bp.get("/<int:batch_id>/export.csv")
def export_csv(batch_id: int):
    _batch_or_404(batch_id)
    return csv_response(batch_id, _filter_from(request.args))


@bp.get("/<int:batch_id>/skipped-rows.csv")
def skipped_rows(batch_id: int):
    """The rows of the file left out at creation, with their reasons, in the page's language."""
    return Response(
        stream_with_context(skipped_rows_csv(db.session, batch_id=batch_id)),
        mimetype="text/csv",
        headers={
            "Content-Disposition": f'attachment; filename="batch-{batch_id}-rows-left-out.csv"',
            "Cache-Control": "no-store",
        },
    )


@bp.post("/<int:batch_id>/exports")
def start_export(batch_id: int):
    _batch_or_404(batch_id)
    started = start_signed_zip(db.session, batch_id=batch_id, user=current_user, now=utcnow())
    db.session.commit()
    if started.created:
        SIGNED_ZIP.enqueue(started.export.id, job_id=SIGNED_ZIP.job_id(id=started.export.id))
    if request.headers.get("HX-Request"):
        return render_template("batches/_export.html", export=started.export, batch_id=batch_id)
    flash(
        _("The ZIP of signed documents is being built; the download link appears on this page when it is ready."),
        "info",
    )
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
    return Response(
        data,
        mimetype="application/zip",
        headers={
            "Content-Disposition": f'attachment; filename="batch-{batch_id}-signed.zip"',
            "Cache-Control": "no-store",
        },
    )
