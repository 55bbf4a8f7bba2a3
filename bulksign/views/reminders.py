"""Staff actions from the batch page: remind now, resend with a new link, correct an address.

Form fields: ``request_ids`` (repeated), ``selector`` (``not_signed`` / ``not_opened``),
``extend_days``, ``email``. HTMX posts get the ``reminders/_result.html`` partial; plain posts
are redirected back to the batch page with a flash saying what was queued and what was skipped.
"""
from __future__ import annotations

from datetime import datetime

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import get_locale, ngettext
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_login import current_user

from ..batches import BatchActionError
from ..bulk_actions import apply_action, follow_up
from ..extensions import db
from ..localtime import batch_time
from ..models import Batch, SigningRequest, utcnow
from ..pipeline import enqueue_sends
from ..reminders import COOLDOWN_REASONS, SELECTORS
from ..resend import MAX_EXTEND_DAYS, change_email, resend_with_new_link

bp = Blueprint("reminders", __name__)

#: Skip reasons of reminders and resends, as staff read them.
REASONS = {
    "signed": _l("already signed"),
    "declined": _l("declined"),
    "invited_recently": _l("invited less than an hour ago"),
    "reminded_recently": _l("reminded within the last hour"),
    "bounced": _l("bounced"),
    "expired": _l("expired"),
    "cancelled": _l("cancelled"),
    "not_sent": _l("not sent yet"),
    "not_found": _l("not in this batch"),
    "deadline_passed": _l("the batch's deadline has passed (give extra days)"),
    "changed_meanwhile": _l("changed by someone else meanwhile"),
}


def background_message(n: int) -> str:
    """What staff read when an action went to a background job."""
    return _("The action is being applied to %(n)s recipients in the background; the progress bar shows it "
             "as it happens.", n=n)


def skipped_text(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {REASONS.get(reason, reason)}" for reason, n in sorted(skipped.items()))


def _ids() -> list[int] | None:
    raw = request.form.getlist("request_ids")
    if not raw:
        return None
    if not all(value.isdigit() for value in raw):
        abort(400, description=_("The selection contains an invalid row id."))
    return [int(value) for value in raw]


def extend_days_field() -> int | None:
    """The optional ``extend_days`` form field (1–365); a 400 with the reason otherwise."""
    raw = (request.form.get("extend_days") or "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_EXTEND_DAYS:
        abort(400, description=_("Extra days must be a whole number from 1 to %(n)s.", n=MAX_EXTEND_DAYS))
    return int(raw)


def _answer(batch_id: int, message: str, category: str, *, send_anyway: dict | None = None):
    """The result as an HTMX partial (with a "send anyway" form when offered) or a flash on the batch page."""
    if request.headers.get("HX-Request"):
        return render_template("reminders/_result.html", message=message, category=category, batch_id=batch_id,
                               send_anyway=send_anyway)
    flash(message, category)
    return redirect(url_for("batches.detail", batch_id=batch_id))


def reminders_done(queued: int, skipped: dict[str, int]) -> tuple[str, str, bool]:
    """What a manual reminder tells staff, its category, and whether to offer "send anyway".

    Nothing sent because everyone was invited or reminded within the hour is a warning, not a success.
    """
    done = ngettext("%(num)s reminder queued.", "%(num)s reminders queued.", queued)
    cooling = sum(n for reason, n in skipped.items() if reason in COOLDOWN_REASONS)
    category = "success" if queued else ("warning" if cooling else "info")
    return with_skips(done, skipped), category, bool(cooling)


def resend_done(resent: int, skipped: dict[str, int], *, deadlines: tuple[datetime, datetime] | None,
                batch: Batch | None) -> tuple[str, str]:
    """What a resend tells staff (with the new deadline extra days gave), and the category."""
    done = ngettext("%(num)s new link sent; the old link no longer works.",
                    "%(num)s new links sent; the old links no longer work.", resent)
    if deadlines and batch is not None:
        first, last = (batch_time(at, batch, locale=str(get_locale())) for at in deadlines)
        done += " " + (_("New deadline: %(date)s.", date=first) if first == last
                       else _("New deadlines from %(first)s to %(last)s.", first=first, last=last))
    return with_skips(done, skipped), "success" if resent else "info"


def _refused(batch_id: int, exc: BatchActionError):
    db.session.rollback()
    if exc.status == 404:
        abort(404)
    if request.headers.get("HX-Request"):
        return render_template("reminders/_result.html", message=exc.message, category="error"), exc.status
    flash(str(exc.message), "error")
    return redirect(url_for("batches.detail", batch_id=batch_id))


def with_skips(done: str, skipped: dict[str, int]) -> str:
    """``done`` followed by how many were skipped and why, for a flash or a partial."""
    if not skipped:
        return done
    return _("%(done)s Skipped %(n)s: %(why)s.", done=done, n=sum(skipped.values()), why=skipped_text(skipped))


@bp.post("/batches/<int:batch_id>/remind")
def remind(batch_id: int):
    ids, selector = _ids(), request.form.get("selector") or None
    if selector is not None and selector not in SELECTORS:
        abort(400, description=_("Unknown selection."))
    if ids is None and selector is None:
        return _answer(batch_id, _("Select recipients, or choose all who have not signed / not opened."), "error")
    force = request.form.get("force") == "1"
    try:
        # Past INLINE_LIMIT requests this runs as a job.
        outcome = apply_action(db.session, action="remind", batch_id=batch_id, request_ids=ids,
                               selector=None if ids is not None else selector, force=force,
                               user=current_user._get_current_object(), now=utcnow())
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    db.session.commit()
    follow_up(outcome)
    if outcome.in_background:
        return _answer(batch_id, background_message(outcome.in_background), "info")
    message, category, offer = reminders_done(outcome.done, outcome.skipped)
    # "Send anyway" repeats the same choice with the hour's wait lifted.
    send_anyway = {"request_ids": ids or [], "selector": selector if ids is None else None} if offer else None
    return _answer(batch_id, message, category, send_anyway=send_anyway)


def _resend(batch_id: int, ids: list[int] | None):
    if not ids:
        return _answer(batch_id, _("Select the recipients who should get a new link."), "error")
    try:
        result = resend_with_new_link(db.session, request_ids=ids, user=current_user, now=utcnow(),
                                      extend_days=extend_days_field())
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    db.session.commit()
    enqueue_sends(result.mail_ids)
    return _answer(batch_id, *resend_done(result.resent, result.skipped, deadlines=result.deadlines,
                                          batch=db.session.get(Batch, batch_id)))


@bp.post("/batches/<int:batch_id>/resend")
def resend_selected(batch_id: int):
    return _resend(batch_id, _ids())


def _request_or_404(request_id: int) -> SigningRequest:
    found = db.session.get(SigningRequest, request_id)
    if found is None:
        abort(404)
    return found


@bp.post("/requests/<int:request_id>/resend")
def resend_one(request_id: int):
    return _resend(_request_or_404(request_id).batch_id, [request_id])


@bp.post("/requests/<int:request_id>/email")
def update_email(request_id: int):
    batch_id = _request_or_404(request_id).batch_id
    try:
        change = change_email(db.session, request_id=request_id, new_email=request.form.get("email", ""),
                              user=current_user, now=utcnow())
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    db.session.commit()
    if not change.changed:
        return _answer(batch_id, _("The address is unchanged."), "info")
    return _answer(batch_id, _("Address changed from %(old)s to %(new)s. Resend to send a new link there.",
                               old=change.old_email, new=change.new_email), "success")
