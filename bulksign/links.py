"""Recipients' signing links: issued with a fresh random nonce, looked up by the token's hash."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from .models import Event, SigningRequest
from .tokens import hash_token, new_nonce, signing_token


def issue_link(session: Session, *, request_id: int, secret: str, now: datetime, actor: str = "system") -> str:
    """Give the request a new link (any older link dies at once) and return its token; the caller commits."""
    nonce = new_nonce()
    token = signing_token(secret=secret, request_id=request_id, nonce=nonce)
    session.execute(
        update(SigningRequest).where(SigningRequest.id == request_id)
        .values(token_nonce=nonce, token_hash=hash_token(token))
    )
    request = session.get(SigningRequest, request_id)
    session.add(Event(request_id=request_id, batch_id=request.batch_id, type="link.issued", created_at=now,
                      actor=actor, details={}))
    return token


def current_token(request: SigningRequest, *, secret: str) -> str | None:
    """The token of the request's current link (re-derived, never stored), or None if it has none."""
    if not request.token_nonce:
        return None
    return signing_token(secret=secret, request_id=request.id, nonce=request.token_nonce)


def signing_url(*, app_url: str, token: str) -> str:
    return f"{app_url}/sign/{token}"


def find_by_token(session: Session, token: str) -> SigningRequest | None:
    """The request whose current link is ``token``; compares hashes, so timing says nothing of the token."""
    if not token or len(token) > 128:
        return None
    return session.scalar(select(SigningRequest).where(SigningRequest.token_hash == hash_token(token)))
