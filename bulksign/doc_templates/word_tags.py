"""The tags of a Word file as the Word check reads them: each ``{{ … }}`` docxtpl joined, the names they use, what
each name is (a party's signature, a field a party fills, a value of the row) and, for what is not understood, the
name meant. Nothing is rendered here (``word_check``)."""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass, field
from enum import StrEnum

from jinja2 import TemplateSyntaxError, meta, nodes

from bulksign.doc_templates.fields import named_field
from bulksign.doc_templates.html_safety import unsafe_jinja
from bulksign.doc_templates.jinja_sandbox import sandbox
from bulksign.doc_templates.template_check import meant_mark
from bulksign.doc_templates.template_parties import PALETTE
from bulksign.doc_templates.variables import BUILTIN_VARIABLES
from bulksign.documents.field_boxes import DEFAULT_TYPE, field_name
from bulksign.documents.signature_box import RECIPIENT_ROLE, SIGNATURE_VARIABLE, mark_role

#: A tag as docxtpl leaves it in a part's XML once it joined the runs it was typed in.
_TAG = re.compile(r"\{\{(.*?)\}\}", re.S)
#: A tag longer than this is not a tag someone wrote on purpose: it is shown cut, and never read.
MAX_TAG_CHARS = 200
#: What a tag that cannot be read is written as while the pages are rendered: ``_unread_<n>``.
UNREAD_PREFIX = "bulksign_unread_"


class TagKind(StrEnum):
    SIGNATURE = "signature"
    FIELD = "field"
    VALUE = "value"
    UNKNOWN = "unknown"


class Problem(StrEnum):
    """Why a tag is not understood (the page says it in words)."""

    UNREADABLE = "unreadable"
    TOO_LONG = "too_long"
    MISSPELT = "misspelt"
    NOT_IN_SAMPLE = "not_in_sample"


@dataclass(frozen=True)
class Tag:
    """One name the document uses: ``written`` as the document has it, the party whose colour it takes (signatures
    and fields), and for one not understood why and the name meant ("" when nothing is close)."""

    name: str
    written: str
    kind: TagKind
    party: str = ""
    field_type: str = ""
    problem: Problem | None = None
    meant: str = ""


@dataclass
class TagReader:
    """Passed each part's XML after docxtpl joined its tags (``docx_templates.fill_patched``): keeps every tag in
    document order, and writes one Jinja cannot read (``{{ signature employer }}``, ``{{ <b>name</b> }}``) as a name
    of its own, so that the pages still render and show where it is."""

    unread: dict[str, str] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)

    def __call__(self, xml: str) -> str:
        patched = _TAG.sub(self._tag, xml)
        try:
            tree = sandbox.parse(patched)
        except TemplateSyntaxError:
            return patched  # the render says what is wrong with its {% %}
        free = meta.find_undeclared_variables(tree)
        self.names = list(dict.fromkeys([*self.names, *(n.name for n in tree.find_all(nodes.Name) if n.name in free)]))
        return patched

    def _tag(self, match: re.Match[str]) -> str:
        inner = html.unescape(match.group(1))
        if len(inner) <= MAX_TAG_CHARS and _readable(match.group(0)):
            return match.group(0)
        name = next((n for n, w in self.unread.items() if w == inner), f"{UNREAD_PREFIX}{len(self.unread)}")
        self.unread[name] = inner
        return "{{ " + name + " }}"


def _readable(tag: str) -> bool:
    try:
        tree = sandbox.parse(html.unescape(tag))
    except TemplateSyntaxError:
        return False
    return unsafe_jinja(tree) is None


def classify(
    reader: TagReader, *, parties: list[str], fields: dict[str, tuple[str, str]], sample: dict[str, str]
) -> tuple[Tag, ...]:
    """Each name ``reader`` found, in document order: ``parties`` are the keys known (a new signature mark adds its
    own), ``fields`` the known fields' (type, party) by mark, ``sample`` the sample row."""
    found: list[Tag] = []
    for name in reader.names:
        if name in reader.unread:
            found.append(_unread(name, reader.unread[name], known=_known(reader, parties, fields, sample)))
        elif role := mark_role(name):
            found.append(Tag(name, _written(name), TagKind.SIGNATURE, party=role))
        elif field_name(name):
            field_type, party = fields.get(name) or _named_field(name, parties=parties)
            found.append(Tag(name, _written(name), TagKind.FIELD, party=party, field_type=field_type))
        elif meant := meant_mark(name, keys=parties) or _case_of(name, _known(reader, parties, fields, sample)):
            found.append(Tag(name, _written(name), TagKind.UNKNOWN, problem=Problem.MISSPELT, meant=meant))
        elif name in BUILTIN_VARIABLES or str(sample.get(name) or "").strip():
            found.append(Tag(name, _written(name), TagKind.VALUE))
        else:
            close = difflib.get_close_matches(name.lower(), [c.lower() for c in sample if sample[c]], n=1, cutoff=0.7)
            meant = next((c for c in sample if close and c.lower() == close[0]), "")
            found.append(Tag(name, _written(name), TagKind.UNKNOWN, problem=Problem.NOT_IN_SAMPLE, meant=meant))
    return tuple(found)


def _named_field(name: str, *, parties: list[str]) -> tuple[str, str]:
    """A new field's (type, party), as saving the file would give it (``fields.named_field``)."""
    named = named_field(field_name(name) or "", roles=parties)
    return (named["type"], named["role"]) if named else (DEFAULT_TYPE, RECIPIENT_ROLE)


def parties_of(names: list[str], *, known: list[str]) -> list[str]:
    """The parties a file signs: ``known`` (a saved template's), then each new signature mark's, in document order."""
    return list(dict.fromkeys([*known, *(role for n in names if (role := mark_role(n)))]))


def colours(parties: list[str], *, known: dict[str, str]) -> dict[str, str]:
    """Each party's colour: a saved template's own, else the palette's in party order."""
    return {p: known.get(p) or PALETTE[i % len(PALETTE)] for i, p in enumerate(parties)}


def shown(written: str) -> str:
    """A tag as the page shows it: cut to ``MAX_TAG_CHARS``."""
    return written if len(written) <= MAX_TAG_CHARS else written[:MAX_TAG_CHARS] + "…"


def _known(
    reader: TagReader, parties: list[str], fields: dict[str, tuple[str, str]], sample: dict[str, str]
) -> list[str]:
    marks = [SIGNATURE_VARIABLE, *(f"signature_{p}" for p in parties if p != RECIPIENT_ROLE)]
    named = [n for n in reader.names if n not in reader.unread and (mark_role(n) or field_name(n))]
    return list(dict.fromkeys([*marks, *fields, *named, *BUILTIN_VARIABLES, *(c for c in sample if sample[c])]))


def _written(name: str) -> str:
    return "{{ " + name + " }}"


def _case_of(name: str, known: list[str]) -> str:
    """The known name ``name`` is in other letters' case (``Name`` → ``name``); "" for none."""
    return next((k for k in known if k != name and k.lower() == name.lower()), "")


def _unread(name: str, inner: str, *, known: list[str]) -> Tag:
    written = "{{" + inner + "}}"
    if len(inner) > MAX_TAG_CHARS:
        return Tag(name, written, TagKind.UNKNOWN, problem=Problem.TOO_LONG)
    # Only words between the braces are read as a name meant: ``{{ signature employer }}``, not ``{{ <b>x</b> }}``.
    words = "_".join(inner.strip(" -").lower().split()) if re.fullmatch(r"[\w\s-]+", inner) else ""
    close = difflib.get_close_matches(words, known, n=1, cutoff=0.75) if words else []
    meant = close[0] if close else (words if re.fullmatch(r"[a-z]\w{0,60}", words) else "")
    return Tag(name, written, TagKind.UNKNOWN, problem=Problem.UNREADABLE, meant=meant)
