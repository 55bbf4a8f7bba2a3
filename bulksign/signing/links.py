"""Recipients' signing links: issued with a fresh random nonce, looked up by the token's hash."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.tokens import hash_token, new_nonce, signing_token
from bulksign.models import Event, SigningRequest


def issue_link(session: Session, *, request_id: int, secret: str, now: datetime, actor: str = "system") -> str:
    """Give the request a new link (any older link dies at once) and return its token; the caller commits."""
    request = session.get_one(SigningRequest, request_id)
    return issue_links(session, requests=[request], secret=secret, now=now, actor=actor)[request_id]


def issue_links(
    session: Session, *, requests: Sequence[SigningRequest], secret: str, now: datetime, actor: str = "system"
) -> dict[int, str]:
    """``issue_link`` for loaded requests, written in one flush; returns request id → token. The caller commits."""
    tokens: dict[int, str] = {}
    for request in requests:
        nonce = new_nonce()
        token = signing_token(secret=secret, request_id=request.id, nonce=nonce)
        request.token_nonce, request.token_hash = nonce, hash_token(token)
        tokens[request.id] = token
    session.add_all(
        [
            Event(request_id=r.id, batch_id=r.batch_id, type="link.issued", created_at=now, actor=actor, details={})
            for r in requests
        ]
    )
    session.flush()
    return tokens


def current_token(request: SigningRequest, *, secret: str) -> str | None:
    """The token of the request's current link (re-derived, never stored), or None if it has none."""
    if not request.token_nonce:
        return None
    return signing_token(secret=secret, request_id=request.id, nonce=request.token_nonce)


def signing_url(*, app_url: str, token: str) -> str:
    return f"{app_url}/sign/{token}"


def short_signing_url(*, app_url: str, token: str) -> str:
    """The link a text message carries: the same token under a shorter path (``views.recipient.short_links``)."""
    return f"{app_url}/s/{token}"


def find_by_token(session: Session, token: str) -> SigningRequest | None:
    """The request whose current link is ``token``; compares hashes, so timing says nothing of the token."""
    if not token or len(token) > 128:
        return None
    return session.scalar(select(SigningRequest).where(SigningRequest.token_hash == hash_token(token)))
