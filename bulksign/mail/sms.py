"""Text messages to recipients' phones, through one small interface: ``provider(config).send(to=, text=)``."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from email.message import EmailMessage
from pathlib import Path
from typing import Protocol

from bulksign.core.logs import log
from bulksign.mail.devmail import mailbox_folder, write_caught

logger = logging.getLogger(__name__)


class SmsError(RuntimeError):
    """The provider did not take the message; the words say why (the job retries)."""


class SmsProvider(Protocol):
    def send(self, *, to: str, text: str) -> None:
        """Hand one message to the provider; raises SmsError when it is not taken."""


class HttpSmsProvider:
    """POST ``{"to": "+49…", "text": "…"}`` as JSON with ``Authorization: Bearer <token>``; any 2xx is taken."""

    def __init__(self, *, url: str, token: str, timeout: float):
        self.url, self.token, self.timeout = url, token, timeout

    def send(self, *, to: str, text: str) -> None:
        body = json.dumps({"to": to, "text": text}).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "Bulksign-SMS"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read(1024)
        except urllib.error.HTTPError as exc:
            answer = exc.read(300).decode("utf-8", "replace")
            raise SmsError(f"The SMS provider answered {exc.code}: {answer}".strip()) from None
        except (urllib.error.URLError, OSError) as exc:
            raise SmsError(f"The SMS provider could not be reached ({exc.__class__.__name__}: {exc}).") from None


class DevSmsProvider:
    """Development: each message becomes a .eml in the caught-mail folder, subject ``SMS to <number>``."""

    def __init__(self, *, folder: Path):
        self.folder = folder

    def send(self, *, to: str, text: str) -> None:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "SMS", to, f"SMS to {to}"
        message.set_content(text)
        name = write_caught(self.folder, message.as_bytes())
        log(logger, logging.INFO, "SMS caught in the development mailbox (/admin/mailbox)", to=to[:4] + "…", file=name)


def provider(config) -> SmsProvider:
    """The configured provider: HTTP when ``SMS_HTTP_URL`` is set, else the development one."""
    if config["SMS_HTTP_URL"]:
        return HttpSmsProvider(
            url=config["SMS_HTTP_URL"], token=config["SMS_HTTP_TOKEN"], timeout=config["SMS_TIMEOUT_SECONDS"]
        )
    return DevSmsProvider(folder=mailbox_folder(config["VAR_DIR"]))
