"""What people type, as it is kept: without the characters that print nothing yet change what others are shown."""

from __future__ import annotations

import re

#: Invisible characters: the bidirectional embeddings, overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069,
#: U+200E, U+200F, U+061C) and the zero-width ones (U+200B–U+200D, U+2060, U+FEFF). Kept, they make a page or the
#: audit certificate show other letters than those stored ("\u202eevil" reads "live", an IBAN's groups swap places)
#: or hide letters in them.
INVISIBLE = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2060\ufeff]")


def visible_text(raw: str | None) -> str:
    """``raw`` without invisible characters (``INVISIBLE``), its runs of white space one space, trimmed."""
    return " ".join(INVISIBLE.sub("", raw or "").split())
