"""The development mail catcher keeps what it caught a week: the mails hold people as real ones would."""

from __future__ import annotations

import time

from bulksign.mail.devmail import KEEP_DAYS, list_caught, write_caught


def test_caught_mail_older_than_its_days_goes_as_new_mail_lands(tmp_path):
    day = 86400
    old = tmp_path / f"{time.time() - (KEEP_DAYS + 1) * day:.6f}-0000abcd.eml"
    recent = tmp_path / f"{time.time() - (KEEP_DAYS - 1) * day:.6f}-0000dcba.eml"
    for path, to in ((old, "ivan@example.com"), (recent, "anna@example.com")):
        path.write_bytes(f"To: {to}\r\nSubject: Please sign\r\n\r\nHello\r\n".encode())

    name = write_caught(tmp_path, b"To: olga@example.com\r\nSubject: New\r\n\r\nHi\r\n")

    assert not old.exists() and recent.exists()
    assert [m.to for m in list_caught(tmp_path).mails] == ["olga@example.com", "anna@example.com"]
    assert list_caught(tmp_path).mails[0].name == name
