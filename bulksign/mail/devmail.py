"""A local SMTP catcher for the embedded setup: every mail lands as a .eml file an admin can read in the app."""

from __future__ import annotations

import argparse
import email
import email.parser
import email.policy
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


def mailbox_folder(var_dir: str) -> Path:
    """Where the embedded setup's caught mail (and the development SMS provider's texts) land."""
    return Path(var_dir) / "mailbox"


#: Days a caught mail (or text) is kept.
KEEP_DAYS = 7


def write_caught(folder: Path, data: bytes) -> str:
    """Store one message as ``folder/<time>-<uuid>.eml`` (whole or not at all), and delete those older than
    ``KEEP_DAYS``; returns the file name."""
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    name = f"{now:.6f}-{uuid.uuid4().hex[:8]}.eml"
    tmp = folder / (name + ".tmp")
    tmp.write_bytes(data)
    tmp.rename(folder / name)
    for path in folder.glob("*.eml"):
        # A name says when its mail came: the part before the dash.
        if CAUGHT_NAME.match(path.name) and float(path.name.split("-")[0]) < now - KEEP_DAYS * 86400:
            path.unlink(missing_ok=True)
    return name


class MaildirHandler:
    """aiosmtpd handler that writes each accepted message with ``write_caught``."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    async def handle_DATA(self, server, session, envelope):
        write_caught(self.folder, envelope.original_content or envelope.content)
        return "250 Message accepted for delivery"


@dataclass(frozen=True)
class CaughtMail:
    name: str
    received_at: datetime
    to: str
    subject: str


@dataclass(frozen=True)
class CaughtPage:
    mails: tuple[CaughtMail, ...]
    #: Pass as ``before`` for the next (older) page; None when nothing older is left.
    next_before: str | None


#: File names sort by arrival time (``<unix time>-<random>.eml``), so a name is the keyset cursor.
CAUGHT_NAME = re.compile(r"^\d+\.\d{6}-[0-9a-f]{8}\.eml$")
#: At most this many files are opened for one page of a search (it goes on from where it stopped).
SCAN_LIMIT = 2000


def _headers(path: Path) -> email.message.Message:
    """The mail's headers only (a mail with a large attachment is not read whole)."""
    with path.open("rb") as fh:
        head = b""
        for line in fh:
            if line in (b"\r\n", b"\n"):
                break
            head += line
    return email.parser.BytesHeaderParser(policy=email.policy.default).parsebytes(head)


def list_caught(folder: Path, *, limit: int = 50, before: str | None = None, q: str = "") -> CaughtPage:
    """The caught mails newest first, ``limit`` at a time, older than the file ``before``; ``q`` searches the
    addresses (To, From) and the subject, case-insensitively."""
    if not folder.is_dir():
        return CaughtPage(mails=(), next_before=None)
    if before is not None and not CAUGHT_NAME.match(before):
        raise ValueError("before must be the name of a caught mail")
    names = sorted((p.name for p in folder.glob("*.eml")), reverse=True)
    if before is not None:
        names = [n for n in names if n < before]
    needle = q.strip().casefold()
    found: list[CaughtMail] = []
    last = None
    for scanned, name in enumerate(names):
        if len(found) == limit or scanned == SCAN_LIMIT:
            return CaughtPage(mails=tuple(found), next_before=last)
        last = name
        try:
            msg = _headers(folder / name)
        except FileNotFoundError:  # cleaned up meanwhile
            continue
        mail = CaughtMail(
            name=name,
            received_at=datetime.fromtimestamp(float(name.split("-")[0]), UTC),
            to=str(msg.get("To", "")),
            subject=str(msg.get("Subject", "")),
        )
        if needle and needle not in f"{mail.to}\n{msg.get('From', '')}\n{mail.subject}".casefold():
            continue
        found.append(mail)
    return CaughtPage(mails=tuple(found), next_before=None)


def read_caught(folder: Path, name: str) -> email.message.EmailMessage | None:
    """One caught mail by file name; names from outside are checked against the folder listing."""
    if "/" in name or "\\" in name or not name.endswith(".eml"):
        return None
    path = folder / name
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        return email.message_from_binary_file(fh, policy=email.policy.default)


#: Names of this host a catcher may listen on; any other ``MAIL_SERVER`` is a real server the app sends to.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def main() -> None:
    """Listen where the app sends (``MAIL_SERVER``, ``MAIL_PORT``, read as the app reads them) and write to the
    app's mailbox folder (under ``VAR_DIR``), unless told otherwise; a server elsewhere needs no catcher here."""
    from aiosmtpd.controller import Controller

    from bulksign.core.config import VAR_DIR, mail_server

    server, port = mail_server()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default=server)
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--dir", default=str(mailbox_folder(str(VAR_DIR))))
    args = parser.parse_args()
    controller = None
    if args.host in LOOPBACK or args.host.startswith("127."):
        controller = Controller(MaildirHandler(Path(args.dir)), hostname=args.host, port=args.port)
        controller.start()
        print(f"SMTP catcher on {args.host}:{args.port}, writing to {args.dir}", flush=True)
    else:
        # Waits all the same: ``make run`` (honcho) stops every process when one ends.
        print(f"MAIL_SERVER is {args.host}: the app sends its mail there, nothing is caught here", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        if controller is not None:
            controller.stop()


if __name__ == "__main__":
    main()
