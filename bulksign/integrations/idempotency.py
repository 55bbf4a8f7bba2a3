"""Idempotency keys: an API client that retries a creating call with the same key gets the first answer again.

The first call claims the key (a committed row, unique per API key) before it does anything, so a
concurrent repeat finds it and is told to wait (``in_progress``); once the call has answered, its
status and body are stored, and a repeat within ``TTL`` gets them back (``replay``) without doing the
work twice. The same key with another request (method, path or body) is refused (``mismatch``).
A refusal (a 4xx the view raises: the request was invalid or not allowed now) or a server error is not
kept: the key is freed, and the client may send the corrected request, or retry, with it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bulksign.models import IdempotencyKey

#: How long an answer is kept (and a key cannot be reused for another request).
TTL = timedelta(hours=24)
#: A claim with no answer after this is taken as abandoned (its process died) and may be claimed again:
#: longer than a web request may run (gunicorn's timeout).
ABANDONED_AFTER = timedelta(minutes=5)
#: Longest key accepted.
MAX_KEY_LENGTH = 200


@dataclass(frozen=True)
class Claim:
    #: ``new`` (go ahead, then ``record``), ``replay``, ``mismatch`` or ``in_progress``.
    outcome: str
    status_code: int | None = None
    body: dict | None = None


def fingerprint(*parts: bytes) -> str:
    """sha256 over the parts that make a request the same request."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def claim(session: Session, *, api_key_id: int, key: str, fingerprint: str, now: datetime) -> Claim:
    """Claim ``key`` for this request, or say what an earlier call with it left (commits a new claim)."""
    row = session.scalar(
        select(IdempotencyKey)
        .where(IdempotencyKey.api_key_id == api_key_id, IdempotencyKey.key == key)
        .with_for_update()
    )
    if row is not None and row.expires_at <= now:
        session.delete(row)
        session.flush()
        row = None
    if row is None:
        session.add(
            IdempotencyKey(
                api_key_id=api_key_id, key=key, fingerprint=fingerprint, created_at=now, expires_at=now + TTL
            )
        )
        try:
            session.commit()
        except IntegrityError:
            # A concurrent call with the same key claimed it first.
            session.rollback()
            return Claim("in_progress")
        return Claim("new")
    if row.status_code is None and row.created_at + ABANDONED_AFTER > now:
        # Whatever the body: the first call's outcome is not known yet.
        session.rollback()
        return Claim("in_progress")
    if row.fingerprint != fingerprint:
        session.rollback()
        return Claim("mismatch")
    if row.status_code is None:
        row.created_at, row.expires_at = now, now + TTL
        session.commit()
        return Claim("new")
    session.rollback()
    return Claim("replay", status_code=row.status_code, body=row.response_body)


def record(session: Session, *, api_key_id: int, key: str, status_code: int | None, body: dict | None) -> None:
    """Keep the answer of a claimed call; None (refused, failed) or a server error frees the key (the caller commits)."""
    row = session.scalar(
        select(IdempotencyKey).where(IdempotencyKey.api_key_id == api_key_id, IdempotencyKey.key == key)
    )
    if row is None:
        return
    if status_code is None or status_code >= 500:
        session.delete(row)
    else:
        row.status_code, row.response_body = status_code, body


def purge_expired(session: Session, *, now: datetime) -> int:
    """Delete the keys past their expiry; how many (the caller commits)."""
    return session.execute(delete(IdempotencyKey).where(IdempotencyKey.expires_at <= now)).rowcount
