"""Every header field of every outgoing mail, made by one function (``header``) under the email package's SMTP policy."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email import policy
from email.header import Header
from email.headerregistry import Address, AddressHeader, BaseHeader, HeaderRegistry, UnstructuredHeader
from typing import TYPE_CHECKING, cast

from flask_mail import Message

from bulksign.core.errors import BulksignError

#: C0 controls (CR, LF, tab …), DEL, C1 controls (NEL …) and Unicode's line and paragraph separators: some reader
#: of a mail ends a header line at each of them, or shows nothing where one stands.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: Fields whose value is a list of addresses (``email.headerregistry.AddressHeader``).
ADDRESS_FIELDS = frozenset({"from", "sender", "to", "cc", "bcc", "reply-to"})
#: A field name as RFC 5322 has it: printable ASCII but the colon.
_FIELD_NAME = re.compile(r"[!-9;-~]+")


# The registry makes each field's class from its kind and ``BaseHeader`` (where ``fold`` and ``name`` are); the stubs
# know the kinds alone.
if TYPE_CHECKING:
    _Unstructured = BaseHeader
else:
    _Unstructured = UnstructuredHeader


class _EncodedText(_Unstructured):
    """Text that is not ASCII, folded by RFC 2047's encoder: the SMTP policy folds between two encoded words at a space
    that readers then drop (python/cpython#144156); ``Header`` keeps every space inside an encoded word."""

    def fold(self, *, policy: policy.Policy) -> str:
        if str(self).isascii():
            return super().fold(policy=policy)
        encoded = Header(str(self), "utf-8", maxlinelen=policy.max_line_length, header_name=self.name)
        return f"{self.name}: {encoded.encode(linesep=policy.linesep)}{policy.linesep}"


class _SmtpPolicy(policy.EmailPolicy):
    """``policy.SMTP`` whose fields read back from a message are the values stored, not parsed again: writing a mail
    out reads its Content-Type fields a dozen times, each a parse under ``EmailPolicy``. Written (folded) as
    before."""

    def header_fetch_parse(self, name, value):
        return value


class _Registry(HeaderRegistry):
    """The email package's registry of field classes, each class made once per field name: the package makes a
    new class (``type()``) each time it makes a field, ~0.1 ms each, a dozen times a mail."""

    def __init__(self) -> None:
        super().__init__()
        self._made: dict[str, type] = {}

    def map_to_type(self, name: str, cls: type) -> None:
        super().map_to_type(name, cls)
        self._made.pop(name.lower(), None)

    def __getitem__(self, name: str) -> type:
        key = name.lower()
        if key not in self._made:
            self._made[key] = super().__getitem__(name)
        return self._made[key]


_REGISTRY = _Registry()
_REGISTRY.map_to_type("subject", _EncodedText)
#: The policy the mail goes out under (CRLF line ends, 78-character folding); its registry makes the fields.
_POLICY = _SmtpPolicy(linesep="\r\n", header_factory=_REGISTRY)

#: An address as Flask-Mail takes one: ``"a@example.com"``, ``"Name <a@example.com>"`` or ``(name, address)``.
AddressValue = str | tuple[str, str]


class HeaderError(BulksignError):
    """A value that cannot go into a header field (an address with a control character, or no address at all);
    ``message`` says which field and why, with the value escaped."""

    status = 500


def one_line(*, text: str) -> str:
    """``text`` as one line: each run of control characters and white space is one space, none at either end."""
    return " ".join(CONTROL_CHARACTERS.sub(" ", text).split())


def header(*, name: str, value: str | AddressValue | Sequence[AddressValue]) -> BaseHeader:
    """The field ``name: value`` as the SMTP policy writes it, always exactly one field: text folded onto one line
    (``one_line``); an address field (``ADDRESS_FIELDS``) takes one address or a list, and raises HeaderError
    for a control character or a value that is not an address."""
    if not _FIELD_NAME.fullmatch(name):
        raise HeaderError(f"{name!r} is not a header field name")
    if name.lower() not in ADDRESS_FIELDS:
        return _POLICY.header_factory(name, one_line(text=str(value)))
    return _address_field(name, (value,) if isinstance(value, (str, tuple)) else tuple(value))


@functools.lru_cache(maxsize=256)
def _address_field(name: str, items: tuple[AddressValue, ...]) -> BaseHeader:
    """An address field, made once per value: the sender and a batch's reply-to come back mail after mail, and
    parsing them costs more than the rest of the mail's fields. The field is never changed once made."""
    return _POLICY.header_factory(name, [_address(field=name, value=item) for item in items])


def _address(*, field: str, value: AddressValue) -> Address:
    if isinstance(value, tuple):
        display_name, addr_spec = value
    else:
        # Where a line break splits "Name <address>" nobody can say which part the rest belongs to.
        if CONTROL_CHARACTERS.search(value):
            raise HeaderError(f"{field}: {value!r} has a line break or another control character in it")
        parsed = _POLICY.header_factory(field, value)
        if parsed.defects or len(parsed.addresses) != 1:
            raise HeaderError(f"{field}: {value!r} is not one e-mail address")
        display_name, addr_spec = parsed.addresses[0].display_name, parsed.addresses[0].addr_spec
    if CONTROL_CHARACTERS.search(addr_spec):
        raise HeaderError(f"{field}: {addr_spec!r} has a line break or another control character in it")
    username, at, domain = addr_spec.rpartition("@")
    if not username.isascii():
        # Only a server speaking SMTPUTF8 takes such an address, and the mail job does not ask for it.
        raise HeaderError(f"{field}: {addr_spec!r} has a local part that is not ASCII")
    try:
        # A domain written in its own script goes in its ASCII (IDNA) form: the policy would make it an encoded
        # word, which no server resolves.
        return Address(
            display_name=one_line(text=display_name), addr_spec=f"{username}{at}{domain.encode('idna').decode('ascii')}"
        )
    except (ValueError, UnicodeError):  # no "@", an empty or overlong label, what the parser cannot take
        raise HeaderError(f"{field}: {addr_spec!r} is not an e-mail address") from None


@dataclass(frozen=True)
class Outgoing:
    """A mail as the SMTP server gets it."""

    #: The message, every field that carries a value from outside made by ``header``.
    data: bytes
    #: MAIL FROM: the sender's address alone.
    envelope_from: str
    #: RCPT TO: each address of To, Cc and Bcc alone, once, in that order.
    envelope_to: tuple[str, ...]


def outgoing(*, message: Message) -> Outgoing:
    """``message`` (what a ``@mailer.builder`` made) ready to send: Flask-Mail's body, parts and attachments, and
    its fields made again by ``header`` from the message's own values; HeaderError when one cannot be made."""
    sender, to = header(name="From", value=message.sender), header(name="To", value=message.recipients)
    copies = [header(name="Cc", value=message.cc)] if message.cc else []
    fields = [sender, to, *copies, header(name="Message-ID", value=message.msgId)]
    if message.reply_to:
        fields.append(header(name="Reply-To", value=message.reply_to))
    if message.subject:
        fields.append(header(name="Subject", value=message.subject))
    fields += [header(name=name, value=value) for name, value in (message.extra_headers or {}).items()]
    hidden = header(name="Bcc", value=message.bcc)  # the envelope's only: a Bcc field would show them to everyone
    # Flask-Mail's own MIME tree (its public as_bytes() is this, serialised): the parts are its work; each field
    # it wrote from an outside value is replaced, not amended, so nothing of the value as given reaches the wire.
    mime = message._message()
    mime.policy = _POLICY  # Flask-Mail's policy.SMTP, but for the fields read back while writing it out
    for field in fields:
        del mime[field.name]
        mime[field.name] = field
    recipients = [
        address.addr_spec for field in (to, *copies, hidden) for address in cast(AddressHeader, field).addresses
    ]
    return Outgoing(
        data=mime.as_bytes(),
        envelope_from=cast(AddressHeader, sender).addresses[0].addr_spec,
        envelope_to=tuple(dict.fromkeys(recipients)),
    )
