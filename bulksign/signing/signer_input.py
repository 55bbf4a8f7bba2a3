"""What a signer types and draws, checked and cleaned as it is kept: the name, the drawn signature, the consent."""

from __future__ import annotations

from io import BytesIO

from flask_babel import lazy_gettext as _l

from bulksign.core.errors import BulksignError
from bulksign.core.typed_text import visible_text
from bulksign.documents.images import ImageProblem, ImageRefused, decoded
from bulksign.documents.pdf_text import unprintable
from bulksign.signing.field_checks import CONTROL_CHARACTERS

#: A drawn signature is a few KB; anything far bigger is not one.
MAX_SIGNATURE_BYTES = 200 * 1024
#: Most pixels a drawn signature may have: it is decoded, and an RGBA copy of it saved (8 bytes a pixel at most).
MAX_SIGNATURE_PIXELS = 4000 * 2000
MAX_NAME_LENGTH = 300
#: The signer's own inputs an ``InvalidInput`` names (its ``field``), so the page marks the one to correct.
NAME, SIGNATURE, CONSENT = "name", "signature", "consent"


class InvalidInput(BulksignError):
    """Input a person must correct; the message (lazily translated, in the page's language) says how."""


def clean_name(raw: str) -> str:
    """The typed full name, trimmed and without invisible characters (``typed_text.visible_text``); raises
    InvalidInput when empty (so also when nothing but invisible characters was typed), too long or holding control
    characters."""
    name = visible_text(raw)
    if not name:
        raise InvalidInput(_l("Type your full name to sign."), field=NAME)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(
            _l("The name is too long (at most %(count)s characters).", count=MAX_NAME_LENGTH), field=NAME
        )
    if CONTROL_CHARACTERS.search(name):
        raise InvalidInput(_l("The name contains characters that cannot be printed."), field=NAME)
    if missing := unprintable(name):  # the signature block would show empty boxes for them
        raise InvalidInput(
            _l("The name has characters the signed document cannot print: %(chars)s.", chars=" ".join(missing[:10])),
            field=NAME,
        )
    return name


def clean_signature_png(data: bytes | None) -> bytes | None:
    """A drawn signature as a clean PNG (decoded and re-encoded, metadata dropped), or None when not drawn."""
    if not data:
        return None
    if len(data) > MAX_SIGNATURE_BYTES:
        raise InvalidInput(_l("The drawn signature is too large. Clear it and draw it again."), field=SIGNATURE)
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise InvalidInput(_l("The drawn signature is not a PNG image."), field=SIGNATURE)
    unreadable = InvalidInput(_l("The drawn signature could not be read. Clear it and draw it again."), field=SIGNATURE)
    try:
        # Within the pictures' memory budget (``documents.images``), with the RGBA copy it is saved from.
        with decoded(data, formats=("PNG",), max_bytes=MAX_SIGNATURE_PIXELS * 8, converted=True) as image:
            out = BytesIO()
            image.convert("RGBA").save(out, "PNG", optimize=True)
    except ImageRefused as refused:
        if refused.problem is ImageProblem.TOO_LARGE:
            raise InvalidInput(_l("The drawn signature is not a usable image."), field=SIGNATURE) from None
        if refused.problem is ImageProblem.BUSY:
            raise InvalidInput(_l("Too many signatures are being read just now. Sign again in a minute.")) from None
        raise unreadable from None
    except Exception:  # Pillow raises many kinds on a broken file; all mean the same to the signer
        raise unreadable from None
    return out.getvalue()


def clean_signature(*, signer_name: str, signature_png: bytes | None, consent: bool) -> tuple[str, bytes | None]:
    """The typed name and drawn signature as they are kept (``clean_name``, ``clean_signature_png``), once consent
    is given; raises InvalidInput saying what to correct."""
    name = clean_name(signer_name)
    image = clean_signature_png(signature_png)
    if not consent:
        raise InvalidInput(_l("Tick “I agree to sign electronically” to sign."), field=CONSENT)
    return name, image
