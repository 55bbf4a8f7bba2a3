"""What happened to one mail handed to the mail server: the transport's answer, for the domain to act on."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bulksign.core.error_tracking import Fault


class Outcome(StrEnum):
    SENT = "sent"
    #: The recipient's server refused the address for good (a 5xx to RCPT TO).
    BOUNCED = "bounced"
    #: Refused otherwise (a 5xx to the message), or it could not be built.
    FAILED = "failed"
    #: Deferred by the server (a 4xx): an attempt it saw.
    RETRY = "retry"
    #: Timed out or dropped while sending: an attempt, and the rest of the chunk would wait as long.
    UNREACHABLE = "unreachable"
    #: No connection at all (refused, no route, a 4xx greeting): an outage, the attempt not counted.
    DOWN = "down"
    #: Not sent: its builder found it no longer needed (``mailer.MailNotNeeded``).
    CANCELLED = "cancelled"


#: Outcomes after which the mail is tried again later.
AGAIN = frozenset({Outcome.RETRY, Outcome.UNREACHABLE, Outcome.DOWN})
#: Outcomes after which the rest of a chunk would only wait for the same server.
SERVER_GONE = frozenset({Outcome.UNREACHABLE, Outcome.DOWN})


@dataclass(frozen=True)
class Delivery:
    kind: Outcome
    #: In words: the server's own answer when it gave one (a refusal, a try-later), else why it was not sent.
    reason: str = ""
    #: Set when only staff can mend it (storage, the server refusing our login): for Sentry.
    fault: Fault | None = None
    #: A text message's id at its provider, which its delivery reports name ("" for a mail).
    reference: str = ""
