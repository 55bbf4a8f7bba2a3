"""What the rich-text editor's palette offers staff to insert without typing braces: each party's signature, the
row's values with a sample, and the fields a party fills; and the colour of each party's chips."""

from __future__ import annotations

from dataclasses import dataclass

from bulksign.doc_templates.columns import needed_columns
from bulksign.doc_templates.fields import SIGNED_TYPES, template_fields
from bulksign.doc_templates.template_parties import PALETTE, party_label, template_parties
from bulksign.doc_templates.variables import sample_row
from bulksign.documents.field_boxes import field_name
from bulksign.documents.signature_box import RECIPIENT_ROLE, SIGNATURE_VARIABLE, mark_role
from bulksign.models import TemplateVersion

#: The row's values every template may use, offered first.
ROW_VALUES = ("name", "email", "phone")


@dataclass(frozen=True)
class PaletteParty:
    key: str
    #: The placeholder of its signature: ``signature`` or ``signature_<key>``.
    mark: str
    label: str
    colour: str


@dataclass(frozen=True)
class PaletteColumn:
    name: str
    sample: str


@dataclass(frozen=True)
class Palette:
    parties: tuple[PaletteParty, ...]
    columns: tuple[PaletteColumn, ...]
    #: Placeholder name → the colour of the party it belongs to (signatures and fields).
    colours: dict[str, str]

    def own_fields(self) -> list[tuple[str, str]]:
        """The marks of the fields the template has and their colours, but a date signed and a signer's name (the
        Word palette offers those for every party)."""
        signed = tuple(f"field_{t}_" for t in SIGNED_TYPES)
        return [(n, c) for n, c in self.colours.items() if n.startswith("field_") and not n.startswith(signed)]


def palette(version: TemplateVersion | None, *, language: str) -> Palette:
    """The palette of a template being edited (``version``: its newest, None for a new one) in ``language``."""
    parties: tuple[PaletteParty, ...]
    if version is None:
        parties = (
            PaletteParty(
                RECIPIENT_ROLE,
                SIGNATURE_VARIABLE,
                party_label(None, role=RECIPIENT_ROLE, language=language),
                PALETTE[0],
            ),
        )
    else:
        parties = tuple(
            PaletteParty(
                p.key,
                SIGNATURE_VARIABLE if p.key == RECIPIENT_ROLE else f"signature_{p.key}",
                p.label(language),
                p.colour,
            )
            for p in template_parties(version)
        )
    used = [v for v in needed_columns(version) if v not in ROW_VALUES] if version is not None else []
    names = [*ROW_VALUES, *(v for v in used if not mark_role(v) and not field_name(v))]
    samples = sample_row(names)
    colour_of = {p.key: p.colour for p in parties}
    colours = {p.mark: p.colour for p in parties}
    if version is not None:
        colours |= {f"field_{f.name}": colour_of.get(f.role, PALETTE[0]) for f in template_fields(version)}
    return Palette(
        parties=parties,
        columns=tuple(PaletteColumn(name, samples[name]) for name in names),
        colours=colours,
    )
