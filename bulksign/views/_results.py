"""What a staff action (remind, resend, a bulk action) tells staff: the HTMX partial's or the flash's words."""

from __future__ import annotations

from datetime import datetime

from flask_babel import get_locale, ngettext
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l

from bulksign.batches.manual_reminders import COOLDOWN_REASONS
from bulksign.core.localtime import batch_time
from bulksign.models import Batch

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
    "purged": _l("deleted under the retention rules"),
    "several_parties": _l(
        "signed by several parties: another party declined, or the recipient has acted (open the row and choose "
        '"Correct and resend" to send a corrected version to every party)'
    ),
    "not_started": _l("their step has not started yet"),
    "countersign_digest": _l("served by the countersigner's digest, one link for all their documents: Remind sends it"),
    "party_bounced": _l("another party's invitation bounced: correct that party's address and resend to them"),
    "address_change_pending": _l("a change of the address waits for approval: approving it sends the new link"),
}


def background_message(n: int) -> str:
    """What staff read when an action went to a background job."""
    return _(
        "The action is being applied to %(n)s recipients in the background; the progress bar shows it as it happens.",
        n=n,
    )


def skipped_text(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {REASONS.get(reason, reason)}" for reason, n in sorted(skipped.items()))


def reminders_done(queued: int, skipped: dict[str, int]) -> tuple[str, str, bool]:
    """What a manual reminder tells staff, its category, and whether to offer "send anyway".

    Nothing sent because everyone was invited or reminded within the hour is a warning, not a success.
    """
    done = ngettext("%(num)s reminder queued.", "%(num)s reminders queued.", queued)
    cooling = sum(n for reason, n in skipped.items() if reason in COOLDOWN_REASONS)
    category = "success" if queued else ("warning" if cooling else "info")
    return with_skips(done, skipped), category, bool(cooling)


def resend_done(
    resent: int,
    skipped: dict[str, int],
    *,
    deadlines: tuple[datetime, datetime] | None,
    batch: Batch | None,
    still_bounced: int = 0,
) -> tuple[str, str]:
    """What a resend tells staff (with the new deadline extra days gave, and the requests another party's bounce
    keeps bounced), and the category."""
    done = ngettext(
        "%(num)s new link sent; the old link no longer works.",
        "%(num)s new links sent; the old links no longer work.",
        resent,
    )
    if still_bounced:
        done += " " + ngettext(
            "%(num)s request stays bounced: another party's invitation bounced too. Correct that party's address "
            "and resend to them.",
            "%(num)s requests stay bounced: another party's invitation bounced too. Correct that party's address "
            "and resend to them.",
            still_bounced,
        )
    if deadlines and batch is not None:
        first, last = (batch_time(at, batch, locale=str(get_locale())) for at in deadlines)
        done += " " + (
            _("New deadline: %(date)s.", date=first)
            if first == last
            else _("New deadlines from %(first)s to %(last)s.", first=first, last=last)
        )
    return with_skips(done, skipped), "success" if resent else "info"


def with_skips(done: str, skipped: dict[str, int]) -> str:
    """``done`` followed by how many were skipped and why, for a flash or a partial."""
    if not skipped:
        return done
    return _("%(done)s Skipped %(n)s: %(why)s.", done=done, n=sum(skipped.values()), why=skipped_text(skipped))
