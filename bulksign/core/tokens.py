"""Secrets handed to people: signing tokens and API keys. Only their sha256 is stored."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

#: 32 bytes = 256 bits of randomness, URL-safe (43 characters).
TOKEN_BYTES = 32


@dataclass(frozen=True)
class IssuedToken:
    """A fresh token: ``value`` goes to its holder once, ``digest`` goes to the database."""

    value: str
    digest: str


def hash_token(value: str) -> str:
    """The stored form of a token (sha256 hex); lookups compare digests, never tokens."""
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


def new_token(prefix: str = "") -> IssuedToken:
    """A new random token, optionally with a readable prefix (e.g. ``bsk_`` for API keys)."""
    value = prefix + secrets.token_urlsafe(TOKEN_BYTES)
    return IssuedToken(value=value, digest=hash_token(value))


def signing_token(*, secret: str, request_id: int, nonce: str) -> str:
    """The recipient's signing token: HMAC(secret, request id + random nonce), 256 bits, URL-safe.

    Derived rather than stored so that a mail job retried after a crash re-sends the very same
    link, while the database holds only the random ``nonce`` and ``hash_token(token)``: a copy of
    the database alone cannot produce a working link. A new nonce (resend) kills the old link.
    """
    mac = hmac.new(secret.encode(), f"signing:{request_id}:{nonce}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def new_nonce() -> str:
    """A fresh random nonce for ``signing_token`` (128 bits)."""
    return secrets.token_hex(16)
