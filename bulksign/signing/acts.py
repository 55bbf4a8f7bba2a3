"""What a signer's open, sign or decline came to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from bulksign.core.errors import Message
from bulksign.core.messages import N_
from bulksign.signing.page_states import PageState


class Act(StrEnum):
    """What a signer's open, sign or decline came to."""

    OPENED = "opened"
    REOPENED = "reopened"
    SIGNED = "signed"
    DECLINED = "declined"
    #: The same move happened before (a double click).
    ALREADY_SIGNED = "already_signed"
    ALREADY_DECLINED = "already_declined"
    #: Expired, declined, cancelled...
    NOT_ALLOWED = "not_allowed"
    #: The batch asks for a one-time code and this session has not entered one.
    CODE_NEEDED = "code_needed"
    #: Input to correct: the outcome's ``message`` says what.
    INVALID = "invalid"


#: The acts that did not happen, for nothing the signer can correct in the form.
REFUSED = frozenset({Act.ALREADY_SIGNED, Act.ALREADY_DECLINED, Act.NOT_ALLOWED, Act.CODE_NEEDED})


@dataclass(frozen=True)
class OpenOutcome:
    #: ``OPENED`` (first open), ``REOPENED``, or the page state when the signer cannot act.
    status: Act | PageState
    request_id: int


@dataclass(frozen=True)
class SignOutcome:
    #: ``SIGNED``, ``INVALID`` or one of ``REFUSED``.
    status: Act
    request_id: int
    #: For ``invalid``: what to correct (lazily translated: ``str()`` it where it is shown).
    message: Message = ""
    #: For ``invalid``: each field of the signer's that is wrong → what to correct there.
    field_errors: Mapping[str, N_] = field(default_factory=dict)
    #: For ``invalid``: the signer's own input to correct (``signer_input.NAME`` …), when it is one of them.
    signer_field: str | None = None


@dataclass(frozen=True)
class DeclineOutcome:
    #: ``DECLINED``, ``INVALID`` or one of ``REFUSED``.
    status: Act
    request_id: int
    #: For ``invalid``: what to correct (lazily translated: ``str()`` it where it is shown).
    message: Message = ""
