"""A local SMTP catcher for the embedded setup: every mail lands as a .eml file an admin can read in the app.

Run: ``python -m bulksign.devmail --port 1025 --dir var/mailbox``.
"""
from __future__ import annotations

import argparse
import email
import email.policy
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path


def mailbox_folder(var_dir: str) -> Path:
    """Where the embedded setup's caught mail (and the development SMS provider's texts) land."""
    return Path(var_dir) / "mailbox"


def write_caught(folder: Path, data: bytes) -> str:
    """Store one message as ``folder/<time>-<uuid>.eml`` (whole or not at all); returns the file name."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.time():.6f}-{uuid.uuid4().hex[:8]}.eml"
    tmp = folder / (name + ".tmp")
    tmp.write_bytes(data)
    tmp.rename(folder / name)
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


def list_caught(folder: Path, *, limit: int = 200) -> list[CaughtMail]:
    """The newest caught mails first."""
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("*.eml"), reverse=True)[:limit]
    result = []
    for path in files:
        with path.open("rb") as fh:
            msg = email.message_from_binary_file(fh, policy=email.policy.default)
        result.append(CaughtMail(
            name=path.name,
            received_at=datetime.fromtimestamp(float(path.name.split("-")[0]), timezone.utc),
            to=str(msg.get("To", "")), subject=str(msg.get("Subject", "")),
        ))
    return result


def read_caught(folder: Path, name: str) -> email.message.EmailMessage | None:
    """One caught mail by file name; names from outside are checked against the folder listing."""
    if "/" in name or "\\" in name or not name.endswith(".eml"):
        return None
    path = folder / name
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        return email.message_from_binary_file(fh, policy=email.policy.default)


def main() -> None:
    from aiosmtpd.controller import Controller

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1025)
    parser.add_argument("--dir", default="var/mailbox")
    args = parser.parse_args()
    controller = Controller(MaildirHandler(Path(args.dir)), hostname=args.host, port=args.port)
    controller.start()
    print(f"SMTP catcher on {args.host}:{args.port}, writing to {args.dir}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
