"""JSON API for following batches: list, one batch with counts, its requests (keyset pages), CSV export."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from .. import dashboard
from ..dashboard import DashboardError, RecipientFilter
from ..extensions import db
from ..models import SigningRequest
from .api import api_error
from .batches import csv_response

bp = Blueprint("api_dashboard", __name__, url_prefix="/api/v1")


def _iso(value):
    return value.isoformat() if value else None


def _batch_json(view: dashboard.BatchView | dashboard.BatchRow) -> dict:
    b = view.batch
    return {"id": b.id, "name": b.name, "status": b.status, "total_count": b.total_count,
            "counts": view.counts.by_status,
            "created_at": _iso(b.created_at), "deadline_at": _iso(b.deadline_at),
            "template": view.template_name, "created_by": view.started_by, "team_id": b.team_id,
            "notify_email": b.notify_email, "one_time_code": b.one_time_code}


def _request_json(r: SigningRequest) -> dict:
    # Never the token, its hash or nonce: a signing link is the recipient's secret.
    return {"id": r.id, "row_number": r.row_number, "email": r.email, "name": r.name, "status": r.status,
            "status_changed_at": _iso(r.status_changed_at), "sent_at": _iso(r.sent_at),
            "opened_at": _iso(r.opened_at), "signed_at": _iso(r.signed_at), "declined_at": _iso(r.declined_at),
            "decline_reason": r.decline_reason, "reminder_count": r.reminder_count,
            "expires_at": _iso(r.expires_at), "complained_at": _iso(r.complained_at), "error": r.error_message}


@bp.get("/batches")
def list_batches():
    page = request.args.get("page", "1")
    if not page.isdigit() or int(page) < 1:
        return api_error("page must be a whole number from 1.", 400)
    listing = dashboard.list_batches(db.session, user=g.api_user, q=request.args.get("q", "")[:200], page=int(page))
    return jsonify(items=[_batch_json(row) for row in listing.rows], page=listing.page, next_page=listing.page + 1 if listing.has_next else None)


@bp.get("/batches/<int:batch_id>")
def get_batch(batch_id: int):
    view = dashboard.batch_view(db.session, batch_id=batch_id)
    if view is None:
        return api_error("No batch with this id.", 404)
    return jsonify(_batch_json(view))


def _filter():
    return RecipientFilter.parse(status=request.args.get("status"), q=request.args.get("q"),
                                 sort=request.args.get("sort"), direction=request.args.get("dir"))


@bp.get("/batches/<int:batch_id>/requests")
def list_requests(batch_id: int):
    if dashboard.batch_view(db.session, batch_id=batch_id) is None:
        return api_error("No batch with this id.", 404)
    limit = request.args.get("limit", str(dashboard.PAGE_SIZE))
    if not limit.isdigit() or not 1 <= int(limit) <= dashboard.MAX_PAGE_SIZE:
        return api_error(f"limit must be between 1 and {dashboard.MAX_PAGE_SIZE}.", 400)
    try:
        page = dashboard.recipients_page(db.session, batch_id=batch_id, flt=_filter(),
                                         cursor=request.args.get("cursor") or None, limit=int(limit))
    except DashboardError as exc:
        return api_error(str(exc), 400)
    return jsonify(items=[_request_json(r) for r in page.items], next_cursor=page.next_cursor)


@bp.get("/batches/<int:batch_id>/export.csv")
def export_csv(batch_id: int):
    if dashboard.batch_view(db.session, batch_id=batch_id) is None:
        return api_error("No batch with this id.", 404)
    try:
        flt = _filter()
    except DashboardError as exc:
        return api_error(str(exc), 400)
    return csv_response(batch_id, flt)
