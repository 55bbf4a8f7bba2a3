"""Text messages to phones, through one small interface: ``provider(config).send(to=, text=, status_url=)`` gives
the provider's id of the message, or raises SmsError saying whether trying again could help."""

from __future__ import annotations

import base64
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from email.message import EmailMessage
from pathlib import Path
from typing import Protocol

from bulksign.core.logs import log
from bulksign.mail.devmail import mailbox_folder, write_caught

logger = logging.getLogger(__name__)

#: Provider answers that say the message itself is refused (a bad or barred number): trying again cannot help.
_REFUSED = frozenset({400, 403, 404, 409, 410, 422})


class SmsError(RuntimeError):
    """The provider did not take the message; the words say why. ``permanent``: it refused this message for good
    (a bad number, a number that opted out); ``unreachable``: it did not answer at all (the next would wait as
    long); otherwise it was busy, and a later try may work."""

    def __init__(self, message: str, *, permanent: bool = False, unreachable: bool = False):
        super().__init__(message)
        self.permanent, self.unreachable = permanent, unreachable


class SmsProvider(Protocol):
    def send(self, *, to: str, text: str, status_url: str = "") -> str:
        """Hand one message to the provider (delivery reports to ``status_url`` where it takes one); its id of the
        message ("" when it gives none). Raises SmsError when it is not taken."""


def _post(request: urllib.request.Request, *, timeout: float) -> bytes:
    """The answer's body of a POST (at most 64 KiB); SmsError in words for a refusal or no answer."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read(65536)
    except urllib.error.HTTPError as exc:
        answer = exc.read(300).decode("utf-8", "replace")
        raise SmsError(
            f"The SMS provider answered {exc.code}: {answer}".strip(), permanent=exc.code in _REFUSED
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise SmsError(
            f"The SMS provider could not be reached ({exc.__class__.__name__}: {exc}).", unreachable=True
        ) from None


def _field(body: bytes, name: str) -> str:
    """A string field of a JSON answer, else ""."""
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        return ""
    value = answer.get(name) if isinstance(answer, dict) else None
    return value[:100] if isinstance(value, str) else ""


class HttpSmsProvider:
    """POST ``{"to": "+49…", "text": "…", "status_url": "…"}`` as JSON with ``Authorization: Bearer <token>``; any
    2xx is taken, its JSON ``id`` (if any) names the message in delivery reports."""

    def __init__(self, *, url: str, token: str, timeout: float):
        self.url, self.token, self.timeout = url, token, timeout

    def send(self, *, to: str, text: str, status_url: str = "") -> str:
        payload = {"to": to, "text": text, **({"status_url": status_url} if status_url else {})}
        headers = {"Content-Type": "application/json", "User-Agent": "Bulksign-SMS"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        return _field(_post(request, timeout=self.timeout), "id")


class TwilioSmsProvider:
    """Twilio's Messages API: ``POST {api}/2010-04-01/Accounts/{sid}/Messages.json``, form fields ``To``, ``From``,
    ``Body`` and ``StatusCallback``, HTTP basic auth (account SID, auth token); its ``sid`` names the message."""

    def __init__(self, *, account_sid: str, auth_token: str, sender: str, api_url: str, timeout: float):
        self.account_sid, self.sender, self.timeout = account_sid, sender, timeout
        self.url = f"{api_url.rstrip('/')}/2010-04-01/Accounts/{urllib.parse.quote(account_sid)}/Messages.json"
        self.auth = "Basic " + base64.b64encode(f"{account_sid}:{auth_token}".encode()).decode()

    def send(self, *, to: str, text: str, status_url: str = "") -> str:
        fields = {"To": to, "From": self.sender, "Body": text, **({"StatusCallback": status_url} if status_url else {})}
        request = urllib.request.Request(
            self.url,
            data=urllib.parse.urlencode(fields).encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Authorization": self.auth,
                "User-Agent": "Bulksign-SMS",
            },
            method="POST",
        )
        return _field(_post(request, timeout=self.timeout), "sid")


class DevSmsProvider:
    """Development: each message becomes a .eml in the caught-mail folder, subject ``SMS to <number>``."""

    def __init__(self, *, folder: Path):
        self.folder = folder

    def send(self, *, to: str, text: str, status_url: str = "") -> str:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "SMS", to, f"SMS to {to}"
        message.set_content(text)
        name = write_caught(self.folder, message.as_bytes())
        log(logger, logging.INFO, "SMS caught in the development mailbox (/admin/mailbox)", to=to[:4] + "…", file=name)
        return ""


def provider(config) -> SmsProvider:
    """The configured provider: Twilio when ``TWILIO_ACCOUNT_SID`` is set, HTTP when ``SMS_HTTP_URL`` is, else the
    development one."""
    if config["TWILIO_ACCOUNT_SID"]:
        return TwilioSmsProvider(
            account_sid=config["TWILIO_ACCOUNT_SID"],
            auth_token=config["TWILIO_AUTH_TOKEN"],
            sender=config["TWILIO_FROM"],
            api_url=config["TWILIO_API_URL"],
            timeout=config["SMS_TIMEOUT_SECONDS"],
        )
    if config["SMS_HTTP_URL"]:
        return HttpSmsProvider(
            url=config["SMS_HTTP_URL"], token=config["SMS_HTTP_TOKEN"], timeout=config["SMS_TIMEOUT_SECONDS"]
        )
    return DevSmsProvider(folder=mailbox_folder(config["VAR_DIR"]))
