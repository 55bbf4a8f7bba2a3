"""Idempotency keys: an API client that retries a creating call with the same key gets the first answer again
(docs/architecture/views.md)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select
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


class ClaimOutcome(StrEnum):
    """What claiming a key found."""

    #: The key is this call's: go ahead, then ``record``.
    NEW = "new"
    #: An earlier call with this request answered: give its answer again.
    REPLAY = "replay"
    #: The key was used for another request.
    MISMATCH = "mismatch"
    #: An earlier call with it has not answered yet.
    IN_PROGRESS = "in_progress"


@dataclass(frozen=True)
class Claim:
    outcome: ClaimOutcome
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
            return Claim(ClaimOutcome.IN_PROGRESS)
        return Claim(ClaimOutcome.NEW)
    if row.status_code is None and row.created_at + ABANDONED_AFTER > now:
        # Whatever the body: the first call's outcome is not known yet.
        session.rollback()
        return Claim(ClaimOutcome.IN_PROGRESS)
    if row.fingerprint != fingerprint:
        session.rollback()
        return Claim(ClaimOutcome.MISMATCH)
    if row.status_code is None:
        row.created_at, row.expires_at = now, now + TTL
        session.commit()
        return Claim(ClaimOutcome.NEW)
    session.rollback()
    return Claim(ClaimOutcome.REPLAY, status_code=row.status_code, body=row.response_body)


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
    gone = cast(CursorResult[Any], session.execute(delete(IdempotencyKey).where(IdempotencyKey.expires_at <= now)))
    return gone.rowcount
