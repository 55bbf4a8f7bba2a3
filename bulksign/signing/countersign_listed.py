"""What a countersigner's "Sign all" was shown, and so consents to: the listed documents' party ids, or for a long
list their digest and count, checked when the run starts: exactly those are signed, or none.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bulksign.core.messages import N_, N_plural

#: At most this many documents in one run (a selection beyond is refused with a message).
MAX_RUN = 20_000
#: A "Sign all" of at most this many documents carries their ids in its form; a longer list, their digest and count.
LISTED_IDS_MAX = 500
_DIGEST = re.compile(r"sha256:([0-9a-f]{64}):([0-9]{1,9})")


@dataclass(frozen=True)
class Listed:
    """The documents a "Sign all" or a selection was shown and so consents to: their party ids, or for a long list
    the digest of those ids (``digest_of``) and how many they are. ``form_value`` goes into the page's form, and
    ``parse`` reads it back."""

    ids: tuple[int, ...] = ()
    digest: str = ""
    count: int = 0

    @classmethod
    def of(cls, ids: Sequence[int]) -> Listed:
        """What a page listing ``ids`` carries: the ids themselves up to ``LISTED_IDS_MAX``, else their digest."""
        if len(ids) <= LISTED_IDS_MAX:
            return cls(ids=tuple(ids), count=len(ids))
        return cls(digest=digest_of(ids), count=len(ids))

    @property
    def form_value(self) -> str:
        return f"sha256:{self.digest}:{self.count}" if self.digest else ",".join(str(i) for i in self.ids)

    @classmethod
    def parse(cls, raw: str | None) -> Listed | None:
        """The form's value read back; None when it is missing or not one (a page from before, a made-up post)."""
        raw = (raw or "").strip()
        found = _DIGEST.fullmatch(raw)
        if found:
            return cls(digest=found.group(1), count=int(found.group(2)))
        parts = raw.split(",")
        if not raw or not all(p.isdigit() and len(p) <= 18 for p in parts):
            return None
        ids = tuple(dict.fromkeys(int(p) for p in parts))
        return cls(ids=ids, count=len(ids))


def digest_of(ids: Iterable[int]) -> str:
    """The digest of a set of party ids (in any order)."""
    return hashlib.sha256(",".join(str(i) for i in sorted(set(ids))).encode()).hexdigest()


#: A run whose list was carried as a digest, or not at all, and is no longer the same.
LIST_CHANGED = N_("The documents waiting for you changed since you opened the page; review the list again.")


def changed_message(gone: int) -> N_plural:
    """Why a run of listed ids is refused: ``gone`` of them no longer wait (signed, declined, ended)."""
    return N_plural(
        "%(num)s document changed since you opened the page; review the list again.",
        "%(num)s documents changed since you opened the page; review the list again.",
        gone,
    )
