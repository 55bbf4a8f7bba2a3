"""Where the signer fills something in: ``{{ field_<name> }}`` marks, the empty box each prints, and finding it.
More in docs/architecture/documents.md."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from markupsafe import Markup

from bulksign.documents.signature_box import (
    MARK_COLOUR,
    WKHTMLTOPDF_SCALE,
    SignatureBox,
    find_framed_boxes,
    mark_role,
)

#: ``{{ field_iban }}`` marks the field ``iban``: lower case letters, digits and ``_``, as a column header reads.
FIELD_MARK = re.compile(r"field_([a-z0-9_]{1,40})")
#: The prefix of a field's mark, and of the column that prefills it.
FIELD_PREFIX = "field_"
#: Fields one template may mark: 8 × 8 shades (``field_colour``).
MAX_FIELDS = 64
#: The kinds of value a field takes, and the printed size of each one's empty box (width, height in mm).
FIELD_SIZES_MM: dict[str, tuple[float, float]] = {
    "text": (60.0, 8.0),
    "number": (35.0, 8.0),
    "date": (35.0, 8.0),
    "checkbox": (5.0, 5.0),
    "choice": (50.0, 8.0),
    "attachment": (60.0, 8.0),
    # Filled in for the party when they sign, not by them: the day they signed and the name they signed with.
    "signed_date": (35.0, 8.0),
    "signer_name": (60.0, 8.0),
}
DEFAULT_TYPE = "text"
#: Smallest frame looked for (points): below a checkbox's 5 mm, above any rule or underline in the same colour.
_MIN_SIDE_PT = 10.0


def field_name(variable: str) -> str | None:
    """The field a variable (or a PDF field's name) marks: ``field_iban`` → ``iban``; None for any other."""
    found = FIELD_MARK.fullmatch(variable)
    return found.group(1) if found else None


def field_indexes(variables: Iterable[str]) -> dict[str, int]:
    """Each field mark among a template's variables → the index of its frame's shade, by name."""
    return {v: i for i, v in enumerate(sorted({v for v in variables if field_name(v)})[:MAX_FIELDS])}


def field_colour(index: int) -> tuple[int, int, int]:
    """Field ``index``'s frame colour: ``MARK_COLOUR`` with red one more, green and blue two steps less per index
    (both renderers write a colour back exactly; two steps leave room for a rounding)."""
    red, green, blue = MARK_COLOUR
    return red + 1, green - 2 * (index // 8), blue - 2 * (index % 8)


def field_colour_hex(index: int) -> str:
    """``field_colour(index)`` as six hex digits (CSS, Word)."""
    return "".join(f"{value:02X}" for value in field_colour(index))


def html_field_mark(index: int, field_type: str = DEFAULT_TYPE) -> Markup:
    """What ``{{ field_<name> }}`` prints in an HTML template: an empty box of its type's size framed in its colour."""
    width, height = (mm / WKHTMLTOPDF_SCALE for mm in FIELD_SIZES_MM.get(field_type, FIELD_SIZES_MM[DEFAULT_TYPE]))
    return Markup(
        f'<span class="bulksign-field" style="display:inline-block;width:{width:.1f}mm;height:{height:.1f}mm;'
        f"border:0.3mm solid #{field_colour_hex(index)};border-radius:0.8mm;vertical-align:text-bottom;"
        f'page-break-inside:avoid;box-sizing:border-box"></span>'
    )


def stored_marks(stored: Iterable[Mapping] | None) -> dict[str, str]:
    """A version's fields as stored (``TemplateVersion.fields``) as mark variable → its type: the marks its
    renders print as boxes (a version saved before fields were read has none: its ``{{ field_x }}`` is a column)."""
    return {f"{FIELD_PREFIX}{f['name']}": f.get("type") or DEFAULT_TYPE for f in stored or ()}


def field_values(marks: Mapping[str, str]) -> dict[str, Markup]:
    """What each field mark (mark variable → its type) prints in an HTML template."""
    return {variable: html_field_mark(index, marks[variable]) for variable, index in field_indexes(marks).items()}


def find_field_boxes(pdf: bytes, *, variables: Iterable[str]) -> dict[str, SignatureBox]:
    """The box each field mark among ``variables`` printed in ``pdf`` (field name → box), in one reading of the
    pages; a mark the document does not show (under a condition) has none. Raises ``signature_box.UnreadablePdf``."""
    indexes = field_indexes(variables)
    if not indexes:
        return {}
    found = find_framed_boxes(
        pdf, colours=[field_colour(i) for i in indexes.values()], min_w=_MIN_SIDE_PT, min_h=_MIN_SIDE_PT
    )
    return {
        name: box
        for v, box in zip(indexes, found, strict=True)
        if box is not None and (name := field_name(v)) is not None
    }


def is_mark(name: str) -> bool:
    """Whether a variable (or a PDF field's name) marks a place rather than printing a column's value: a party's
    signature (``signature_box.mark_role``) or a field the signer fills."""
    return mark_role(name) is not None or field_name(name) is not None
