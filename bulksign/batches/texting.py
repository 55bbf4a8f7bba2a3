"""Texts in a batch's life: which channel a request is reached by, what its texts' states are called, the batch's
cap on texts, and the fallback from a bounced mail to a text (and from a failed text to a mail).
docs/architecture/batches.md, "Text messages"."""

from __future__ import annotations

from flask_babel import lazy_gettext as _l

from bulksign.models.batches import Reach

#: The batch's channel in words (the new-batch page, the batch page).
REACH_LABELS = {
    Reach.MAIL: _l("Email only"),
    Reach.TEXT_WITHOUT_ADDRESS: _l("Email, or a text message when a row has a phone and no address"),
    Reach.TEXT_ON_BOUNCE: _l("Email, and a text message when the email bounces"),
    Reach.TEXT_BOTH: _l("Email; text messages for rows without an address and when an email bounces"),
}
