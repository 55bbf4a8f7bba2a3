"""A template's parties as people read them: each party's key (its marks' and columns' word), its label in each
language, its colour, and who signs as it by default; and the order they sign in. A version saved before parties
were kept derives them from its roles. More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from flask_babel import force_locale, gettext

from bulksign.core.config import LANGUAGES
from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError
from bulksign.documents.signature_box import MAX_MARKS, RECIPIENT_ROLE
from bulksign.mail.email_checks import check_email
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import TemplateVersion

#: A party's key: what its signature mark (``signature_<key>``) and its columns (``<key>_email``) are made of.
KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")
MAX_LABEL_CHARS = 80
MAX_NAME_CHARS = 300
#: The colours parties get in turn, readable on white and told apart from each other.
PALETTE = ("#1f6feb", "#b35900", "#1a7f37", "#8250df", "#bf3989", "#0a7c86", "#6e7781", "#9a6700")
_COLOUR = re.compile(r"#[0-9a-fA-F]{6}")
#: Labels of the words templates used as roles before parties had labels, in every language of the catalog.
KNOWN_LABELS = {
    RECIPIENT_ROLE: N_("Recipient"),
    "employee": N_("Employee"),
    "employer": N_("Employer"),
    "manager": N_("Manager"),
    "line_manager": N_("Line manager"),
    "witness": N_("Witness"),
    "director": N_("Director"),
    "hr": N_("HR"),
}


class PartySource(StrEnum):
    """Who signs as a party by default."""

    #: The row's own person (the recipient; only it).
    ROW = "row"
    #: A person per row, from the file's ``<key>_email`` (``_name``) columns.
    COLUMNS = "columns"
    #: One person for every batch, named on the template (a batch may name another).
    FIXED = "fixed"


class PartiesError(TemplateError):
    """Parties staff gave that cannot be kept; ``field`` names the party."""

    def __init__(self, message: N_, *, party: str | None = None):
        super().__init__(message, field=party)


@dataclass(frozen=True)
class PartyDef:
    """One party of a template."""

    key: str
    #: Language → what people read: "Employer", "Работодатель"; a language without one reads the key's default.
    labels: Mapping[str, str] = field(default_factory=dict)
    colour: str = PALETTE[0]
    source: PartySource = PartySource.COLUMNS
    #: A ``fixed`` party's person, as the template names them (a batch may name another).
    name: str = ""
    email: str = ""

    def label(self, language: str) -> str:
        """The party as readers of ``language`` call it: its own label, else the label of its key's word."""
        return self.labels.get(language) or default_label(self.key, language=language)

    def to_json(self) -> dict[str, Any]:
        """As stored in ``TemplateVersion.parties`` and answered by the API."""
        return {
            "key": self.key,
            "labels": dict(self.labels),
            "colour": self.colour,
            "source": str(self.source),
            "name": self.name,
            "email": self.email,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartyDef:
        return cls(
            key=str(data["key"]),
            labels=dict(data.get("labels") or {}),
            colour=str(data.get("colour") or PALETTE[0]),
            source=PartySource(data.get("source") or PartySource.COLUMNS),
            name=str(data.get("name") or ""),
            email=str(data.get("email") or ""),
        )


def default_label(key: str, *, language: str) -> str:
    """The label of a party without one of its own: a known word translated, else the key as words."""
    known = KNOWN_LABELS.get(key)
    if known is None:
        return key.replace("_", " ").capitalize()
    with force_locale(language):
        return str(gettext(known.msgid))


def _derived(key: str, index: int) -> PartyDef:
    source = PartySource.ROW if key == RECIPIENT_ROLE else PartySource.COLUMNS
    return PartyDef(key=key, colour=PALETTE[index % len(PALETTE)], source=source)


def template_parties(version: TemplateVersion) -> tuple[PartyDef, ...]:
    """The version's parties in its order: as saved, with any role its marks add after them; derived from its roles
    for a version saved before parties were kept."""
    saved = [PartyDef.from_json(p) for p in version.parties or ()]
    keys = {p.key for p in saved}
    roles = [r for r in (version.roles or (RECIPIENT_ROLE,)) if r not in keys]
    return (*saved, *(_derived(key, len(saved) + i) for i, key in enumerate(roles)))


def party_label(version: TemplateVersion | None, *, role: str, language: str) -> str:
    """The one way a party is named to people: ``role``'s label on ``version`` in ``language``."""
    if version is not None:
        for party in template_parties(version):
            if party.key == role:
                return party.label(language)
    return default_label(role, language=language)


def party_labels(version: TemplateVersion | None, *, language: str) -> dict[str, str]:
    """Every party of ``version`` → its label in ``language`` (``party_label`` of each)."""
    keys = [p.key for p in template_parties(version)] if version is not None else [RECIPIENT_ROLE]
    return {key: party_label(version, role=key, language=language) for key in keys}


def template_routing(version: TemplateVersion) -> list[list[str]]:
    """The order batches of ``version`` start from: as saved (parties no longer in it left out, parties new to it
    each a step at the end), else the recipient first, then a step per other party."""
    keys = [p.key for p in template_parties(version)]
    steps = [[k for k in step if k in keys] for step in version.routing or ()]
    steps = [step for step in steps if step]
    placed = {k for step in steps for k in step}
    if not steps:
        ordered = [RECIPIENT_ROLE, *(k for k in keys if k != RECIPIENT_ROLE)]
        return [[k] for k in ordered]
    return steps + [[k] for k in keys if k not in placed]


def check_parties(given: Sequence[Mapping[str, Any]], *, marked: Sequence[str]) -> list[PartyDef]:
    """Staff's parties, checked: each key a word of lowercase letters, digits and ``_`` (the recipient's is
    ``recipient``, its person the row's), given once; labels without control characters; a fixed party's address a
    real one. The recipient is added when left out; every role the document marks keeps a party."""
    if not isinstance(given, Sequence) or isinstance(given, str | bytes):
        raise PartiesError(N_("Parties must be a list."))
    if len(given) > MAX_MARKS:
        raise PartiesError(N_("A template may have at most %(n)s parties.", n=MAX_MARKS))
    parties: list[PartyDef] = []
    for index, raw in enumerate(given):
        if not isinstance(raw, Mapping):
            raise PartiesError(N_("Each party must be an object with a key and labels."))
        parties.append(_checked_party(raw, index=index, taken={p.key for p in parties}))
    keys = [p.key for p in parties]
    if RECIPIENT_ROLE not in keys:
        parties.insert(0, _derived(RECIPIENT_ROLE, len(parties)))
    missing = [role for role in marked if role not in keys and role != RECIPIENT_ROLE]
    if missing:
        raise PartiesError(
            N_(
                "The document has a signature place for %(keys)s: keep a party for it, or take its place out first.",
                keys=", ".join(missing),
            ),
            party=missing[0],
        )
    return parties


def _checked_party(raw: Mapping[str, Any], *, index: int, taken: set[str]) -> PartyDef:
    key = str(raw.get("key") or "").strip()
    if not KEY.fullmatch(key):
        raise PartiesError(
            N_(
                "Party %(n)s: “%(key)s” cannot be a party's key; use lowercase letters, digits and _ and start with a "
                "letter, like employer or line_manager.",
                n=index + 1,
                key=key[:40],
            ),
            party=key[:40] or None,
        )
    if key in taken:
        raise PartiesError(N_("Two parties have the key %(key)s: each needs its own.", key=key), party=key)
    labels_given = raw.get("labels") or {}
    if not isinstance(labels_given, Mapping):
        raise PartiesError(N_("The labels of %(key)s must be given per language.", key=key), party=key)
    labels: dict[str, str] = {}
    for language, text in labels_given.items():
        if language not in LANGUAGES:
            raise PartiesError(
                N_("A label of %(key)s is for a language we do not know: %(language)s.", key=key, language=language),
                party=key,
            )
        text = " ".join(str(text or "").split())
        if len(text) > MAX_LABEL_CHARS or CONTROL_CHARACTERS.search(text):
            raise PartiesError(
                N_("The label of %(key)s must be one line of at most %(n)s characters.", key=key, n=MAX_LABEL_CHARS),
                party=key,
            )
        if text:
            labels[str(language)] = text
    colour = str(raw.get("colour") or PALETTE[index % len(PALETTE)])
    if not _COLOUR.fullmatch(colour):
        raise PartiesError(N_("The colour of %(key)s must be written like #1f6feb.", key=key), party=key)
    return replace(_source_of(raw, key=key), key=key, labels=labels, colour=colour.lower())


def _source_of(raw: Mapping[str, Any], *, key: str) -> PartyDef:
    """Who signs as the party by default, checked: the recipient is the row's person, any other party a person per
    row or one fixed person with a real address."""
    try:
        source = PartySource(raw.get("source") or (PartySource.ROW if key == RECIPIENT_ROLE else PartySource.COLUMNS))
    except ValueError:
        raise PartiesError(
            N_("Who signs as %(key)s must be one of: row, columns, fixed.", key=key), party=key
        ) from None
    if (source == PartySource.ROW) != (key == RECIPIENT_ROLE):
        raise PartiesError(
            N_("Only the recipient is the row's own person; %(key)s is a person per row or one fixed person.", key=key)
            if key != RECIPIENT_ROLE
            else N_("The recipient is each row's own person."),
            party=key,
        )
    name = " ".join(str(raw.get("name") or "").split())[:MAX_NAME_CHARS]
    email = str(raw.get("email") or "").strip()
    if source != PartySource.FIXED:
        return PartyDef(key=key, source=source)
    checked, problem = check_email(email)
    if problem or checked is None:
        raise PartiesError(
            N_("Give the address of the one person who signs as %(key)s: %(problem)s", key=key, problem=problem or ""),
            party=key,
        )
    return PartyDef(key=key, source=source, name=name, email=checked)


def check_routing(given: object, *, keys: Sequence[str]) -> list[list[str]]:
    """Staff's signing order: a list of steps, each a list of party keys who sign at the same time; every party in
    exactly one step. PartiesError in plain words otherwise."""
    if not isinstance(given, list) or not all(isinstance(step, list) and step for step in given):
        raise PartiesError(N_("The signing order must be a list of steps, each with at least one party."))
    placed: list[str] = []
    for step in given:
        for key in step:
            if not isinstance(key, str) or key not in keys:
                raise PartiesError(N_("The signing order names %(key)s, who is not a party.", key=str(key)[:40]))
            if key in placed:
                raise PartiesError(
                    N_("The signing order has %(key)s twice: each party signs once.", key=key), party=key
                )
            placed.append(key)
    left_out = [k for k in keys if k not in placed]
    if left_out:
        raise PartiesError(
            N_("The signing order leaves out %(keys)s: put every party in a step.", keys=", ".join(left_out)),
            party=left_out[0],
        )
    return [list(step) for step in given]
