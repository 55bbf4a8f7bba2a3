"""Secrets handed to people: signing tokens and API keys. Only their sha256 is stored."""
from __future__ import annotations

import hashlib
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
