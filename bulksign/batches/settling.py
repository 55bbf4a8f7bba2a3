"""What a sent mail's outcome means, per mail kind: a kind registers its settle step beside its builder
(``@settles``); other kinds' outcomes are only recorded (``record_outcome``). A leaf of the domain."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session

from bulksign.mail.outcomes import Delivery, Outcome
from bulksign.models import OutgoingMail, SigningRequest
from bulksign.models.mail import MailKind, MailStatus


class Settle(Protocol):
    def __call__(
        self, session: Session, *, mail: OutgoingMail, request: SigningRequest | None, delivery: Delivery, now: datetime
    ) -> None:
        """Record ``delivery`` (sent, failed or cancelled: a final outcome, not a refusal) on ``mail`` and what
        follows from it; the caller commits."""


#: kind → its settle step; a kind not listed settles by ``record_outcome``.
SETTLES: dict[str, Settle] = {}


def settles(kind: MailKind) -> Callable[[Settle], Settle]:
    """Register the step that settles mails of ``kind`` (``Settle``); a kind has one."""

    def register(settle: Settle) -> Settle:
        known = SETTLES.setdefault(kind, settle)
        if _name(known) != _name(settle):
            raise ValueError(f"mail kind {kind!r} has two settle steps: {_name(known)} and {_name(settle)}")
        SETTLES[kind] = settle
        return settle

    return register


def _name(settle: Settle) -> str:
    return f"{settle.__module__}.{getattr(settle, '__qualname__', settle)}"


def record_outcome(
    session: Session, *, mail: OutgoingMail, request: SigningRequest | None, delivery: Delivery, now: datetime
) -> None:
    """The outcome on the mail row alone; the caller commits."""
    mail.status, mail.error = MailStatus(delivery.kind.value), delivery.reason or None
    if delivery.kind is Outcome.SENT:
        mail.sent_at = now
