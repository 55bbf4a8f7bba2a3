"""Destructive staff and admin actions ask first: a POST to an endpoint of ``ASKS_FIRST`` without ``confirmed=1``
answers what will happen, with the form again to confirm (docs/architecture/views.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import Flask, abort, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_babel import ngettext
from flask_login import current_user

from bulksign.batches.bulk_actions import cancellable_count, open_count
from bulksign.batches.progress import MAX_CANCEL_REASON
from bulksign.batches.recipients_table import DashboardError, RecipientFilter, resolve_selection
from bulksign.core.extensions import db
from bulksign.models import ApiKey, Batch, Team, User
from bulksign.people import access
from bulksign.people.users import active_api_key_count
from bulksign.recipients.suppressions import WHY, in_force_among

#: The form field that says the person saw the question and meant it.
CONFIRMED = "confirmed"


@dataclass(frozen=True)
class Question:
    #: The heading: the action and whom it touches ("Reset the password of ann@example.com?").
    title: str
    #: What happens, in plain words, including how many are affected and what cannot be undone.
    consequences: tuple[str, ...]
    #: The button that acts ("Reset the password").
    confirm: str
    #: Where "Keep it" leads back to.
    back: str
    #: The label of an optional reason the confirmed form sends as ``reason`` (a cancel's, told to its parties).
    reason: str | None = None


def _reset_password(args: dict) -> Question:
    user = db.session.get(User, args["user_id"]) or abort(404)
    return Question(
        title=_("Reset the password of %(email)s?", email=user.email),
        consequences=(
            _("Their current password stops working at once and they are logged out on every device."),
            _("You get a new password, shown once, to give them."),
        ),
        confirm=_("Reset the password"),
        back=url_for("admin.index"),
    )


def _disable_user(args: dict) -> Question | None:
    if request.form.get("disabled") != "1":
        return None  # enabling takes nothing away
    user = db.session.get(User, args["user_id"]) or abort(404)
    if user.id == current_user.id:
        return None  # the view refuses it
    keys = active_api_key_count(db.session, user_id=user.id)
    return Question(
        title=_("Disable the account of %(email)s?", email=user.email),
        consequences=(
            _("They are logged out and can no longer log in."),
            ngettext(
                "Their %(num)s API key is refused until the account is enabled again.",
                "Their %(num)s API keys are refused until the account is enabled again.",
                keys,
            )
            if keys
            else _("They have no API keys."),
            _("Their batches and templates stay; you can enable the account again later."),
        ),
        confirm=_("Disable the account"),
        back=url_for("admin.index"),
    )


def _revoke_key(args: dict) -> Question:
    key = db.session.get(ApiKey, args["key_id"]) or abort(404)
    return Question(
        title=_("Revoke the API key %(name)s of %(email)s?", name=key.name or key.prefix, email=key.user.email),
        consequences=(
            _("Programs that use it are refused from now on."),
            _("This cannot be undone: a revoked key never works again; make a new one if needed."),
        ),
        confirm=_("Revoke the key"),
        back=url_for("admin.index"),
    )


def _remove_member(args: dict) -> Question:
    team = db.session.get(Team, args["team_id"]) or abort(404)
    user = db.session.get(User, args["user_id"]) or abort(404)
    return Question(
        title=_("Take %(email)s out of %(team)s?", email=user.email, team=team.name),
        consequences=(
            _("They no longer see the team's batches and templates (their own stay theirs)."),
            _("You can add them again later."),
        ),
        confirm=_("Take them out"),
        back=url_for("admin.teams"),
    )


def _lift_suppression(args: dict) -> Question | None:
    email = request.form.get("email", "").strip().lower()
    entry = in_force_among(db.session, [email]).get(email)
    if entry is None:
        return None  # the view says it is not on the list
    return Question(
        title=_("Mail %(email)s again?", email=entry.email),
        consequences=(
            _(
                "No mail goes to it since %(date)s: %(why)s.",
                date=f"{entry.created_at:%Y-%m-%d}",
                why=_(WHY[entry.source]),
            ),
            _("Lifted, it gets mail from every batch again; its failed invitations are not resent by themselves."),
        ),
        confirm=_("Lift the entry"),
        back=url_for("suppressions.index", q=request.form.get("q") or None),
    )


def _unshare(args: dict) -> Question:
    batch = access.batch_for_action(db.session, batch_id=args["batch_id"], user=current_user)
    user = db.session.get(User, args["user_id"]) or abort(404)
    return Question(
        title=_("Stop sharing %(batch)s with %(email)s?", batch=batch.name, email=user.email),
        consequences=(
            _("They no longer see this batch, unless their team does."),
            _("You can share it with them again later."),
        ),
        confirm=_("Stop sharing"),
        back=url_for("batches.detail", batch_id=batch.id),
    )


def _selected_cancellable(batch_id: int) -> int:
    """How many of the selected recipients a cancel would stop (signed, declined, failed ones stay as they are)."""
    try:
        flt = RecipientFilter.parse(
            status=request.form.get("status"),
            q=request.form.get("q"),
            sort=None,
            direction=None,
            waiting_for=request.form.get("waiting_for"),
        )
    except DashboardError as exc:
        abort(400, description=str(exc))
    raw = request.form.getlist("request_ids")
    if not all(v.isdigit() for v in raw):
        abort(400, description=_("The selection contains an invalid row id."))
    ids = resolve_selection(
        db.session,
        batch_id=batch_id,
        request_ids=[int(v) for v in raw],
        select_all=request.form.get("select_all") == "1",
        flt=flt,
    ).request_ids
    return cancellable_count(db.session, request_ids=ids)


#: A cancel's reason: whom it is told to.
REASON_LABEL = _l("Reason, told to those already invited (optional)")
#: What the people a cancel stops are told.
TOLD = _l(
    "Everyone already invited gets a short mail saying the sender cancelled it, with your reason if you give one."
)


def _cancel(args: dict) -> Question | None:
    action = request.form.get("action")
    if action not in ("cancel", "cancel_batch"):
        return None
    batch: Batch = access.batch_for_action(db.session, batch_id=args["batch_id"], user=current_user)
    back = url_for("batches.detail", batch_id=batch.id)
    if action == "cancel_batch":
        n = open_count(db.session, batch_id=batch.id)
        return Question(
            title=_("Cancel the batch %(name)s?", name=batch.name),
            consequences=(
                ngettext(
                    "%(num)s recipient has not signed yet: their link stops working at once and they can no longer sign.",
                    "%(num)s recipients have not signed yet: their links stop working at once and they can no longer sign.",
                    n,
                ),
                _("No more invitations or reminders go out. Documents already signed stay signed."),
                TOLD,
                _("This cannot be undone."),
            ),
            confirm=ngettext("Cancel the batch (%(num)s request)", "Cancel the batch (%(num)s requests)", n),
            back=back,
            reason=REASON_LABEL,
        )
    if not request.form.getlist("request_ids") and request.form.get("select_all") != "1":
        return None  # the view says to select someone first
    n = _selected_cancellable(batch.id)
    if not n:
        return None  # nothing to stop: the view says so
    return Question(
        title=ngettext("Cancel %(num)s request?", "Cancel %(num)s requests?", n),
        consequences=(
            ngettext(
                "Its link stops working at once and the recipient can no longer sign.",
                "Their links stop working at once and the recipients can no longer sign.",
                n,
            ),
            _("Selected recipients who already signed, declined or failed stay as they are."),
            TOLD,
            _("This cannot be undone."),
        ),
        confirm=ngettext("Cancel %(num)s request", "Cancel %(num)s requests", n),
        back=back,
        reason=REASON_LABEL,
    )


#: endpoint → the question its POST asks first (None: this form takes nothing away, it acts at once).
ASKS_FIRST: dict[str, Callable[[dict], Question | None]] = {
    "admin.reset_password": _reset_password,
    "admin.toggle_disabled": _disable_user,
    "admin.revoke_key": _revoke_key,
    "admin.remove_team_member": _remove_member,
    "suppressions.lift": _lift_suppression,
    "batch_access.unshare": _unshare,
    "batches.bulk_action": _cancel,
}


def _ask_first():
    if request.method != "POST" or request.form.get(CONFIRMED) == "1":
        return None
    ask = ASKS_FIRST.get(request.endpoint or "")
    question = ask(request.view_args or {}) if ask else None
    if question is None:
        return None
    asked = ("csrf_token", CONFIRMED, "reason") if question.reason else ("csrf_token", CONFIRMED)
    fields = [(k, v) for k, v in request.form.items(multi=True) if k not in asked]
    context = {
        "question": question,
        "action": request.path,
        "fields": fields,
        "reason": request.form.get("reason", ""),
        "reason_max": MAX_CANCEL_REASON,
    }
    if request.headers.get("HX-Request"):
        return render_template("confirm/_step.html", target=request.headers.get("HX-Target"), **context)
    return render_template("confirm/page.html", **context)


def init_app(app: Flask) -> None:
    # After each blueprint's own hooks (admins only), which its registration put first.
    for blueprint in sorted({endpoint.partition(".")[0] for endpoint in ASKS_FIRST}):
        app.before_request_funcs.setdefault(blueprint, []).append(_ask_first)
