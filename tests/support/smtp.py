"""A real SMTP server (aiosmtpd) on loopback that records what it receives and can be told to fail."""

from __future__ import annotations

import email
import email.policy
import re
import threading
from collections import deque
from dataclasses import dataclass, field

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from .services import free_port


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: email.message.EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    @property
    def message_id(self) -> str:
        return str(self.message["Message-ID"])

    @property
    def kind(self) -> str:
        """What the mail is, as its Message-ID key begins: ``invitation``, ``reminder``, ``completion-notice`` …"""
        return re.match(r"<([a-z-]+?)-\d", self.message_id).group(1)

    def text(self) -> str:
        part = self.message.get_body(preferencelist=("plain", "html"))
        return part.get_content() if part else ""

    def html(self) -> str:
        part = self.message.get_body(preferencelist=("html",))
        return part.get_content() if part else ""


@dataclass
class RecordingHandler:
    received: list[Received] = field(default_factory=list)
    #: Replies to give instead of accepting, consumed one per message (e.g. "451 4.3.0 Try later").
    scripted_replies: deque = field(default_factory=deque)
    #: Recipient address → permanent reply, e.g. {"gone@example.com": "550 5.1.1 No such user"}.
    reject_recipients: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        reply = self.reject_recipients.get(address.lower())
        if reply:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            if self.scripted_replies:
                return self.scripted_replies.popleft()
            message = email.message_from_bytes(
                envelope.original_content or envelope.content, policy=email.policy.default
            )
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 Message accepted"


class SmtpServer:
    """``login``: the (user, password) the server then requires over AUTH (in plain text, on loopback)."""

    def __init__(self, *, login: tuple[str, str] | None = None):
        self.port = free_port()
        self.handler = RecordingHandler()
        auth = (
            {} if login is None else {"authenticator": _only(login), "auth_required": True, "auth_require_tls": False}
        )
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port, **auth)

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    @property
    def received(self) -> list[Received]:
        return self.handler.received

    def of_kind(self, *kinds: str) -> list[Received]:
        """The mails received of these kinds (``Received.kind``), in order."""
        return [m for m in self.received if m.kind in kinds]

    def to(self, address: str) -> list[Received]:
        return [m for m in self.received if address.lower() in (r.lower() for r in m.rcpt_tos)]

    def reset(self) -> None:
        self.handler.received.clear()
        self.handler.scripted_replies.clear()
        self.handler.reject_recipients.clear()


def _only(login: tuple[str, str]):
    """An aiosmtpd authenticator that accepts this one user and password."""
    user, password = (part.encode() for part in login)

    def authenticate(server, session, envelope, mechanism, auth_data) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (user, password)
        return AuthResult(success=ok, handled=False)

    return authenticate
