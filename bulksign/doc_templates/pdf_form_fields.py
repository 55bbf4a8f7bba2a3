"""What staff make of a fillable PDF's own form fields on its placement page: a field a party fills, a party's
signature, a column of the file, or (not listed) the column of its own name, as before. Each one assigned is renamed
to the variable a placed box of the same use takes (``field_<name>``, ``signature_<key>``, the column), so
everything downstream of ``pdf_forms`` — filling, the parties' places, the signers' fields, sealing — treats it as
it treats placed boxes. Where the recipient's signature goes, found among them, for the template page.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from pypdf import PdfReader

from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.pdf_forms import BOX_NAME, FieldBox, Page, PdfForm, placed_boxes, read_form
from bulksign.documents.field_boxes import DEFAULT_TYPE, FIELD_PREFIX, field_name, is_mark
from bulksign.documents.signature_box import RECIPIENT_ROLE, SIGNATURE_VARIABLE
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import TemplateVersion

#: What a form field may be made: a field a party fills, a party's signature, a column of the file.
USES = ("field", "signature", "column")
#: The types a party's form field may take (an attachment has no place in a form field's box; the signed date and
#: the signer's name are the palette's).
FORM_FIELD_TYPES = ("text", "number", "date", "checkbox", "choice")
#: A party's key, as ``template_parties`` takes it.
_PARTY_KEY = re.compile(r"[a-z0-9_]{1,40}")
#: A field's name made of a form field's: what ``field_boxes.FIELD_MARK`` takes.
_NOT_IN_NAME = re.compile(r"[^a-z0-9]+")
_MAX_NAME = 40


@dataclass(frozen=True)
class FormFieldUse:
    """One form field, assigned."""

    #: The form field's own (qualified) name, as ``pdf_forms.read_form`` reads it.
    name: str
    #: One of ``USES``.
    use: str
    #: ``field``: who fills it; ``signature``: whose place it is.
    party: str = RECIPIENT_ROLE
    #: ``field``: one of ``FORM_FIELD_TYPES``.
    type: str = DEFAULT_TYPE
    #: ``field``: the field's name (``fields.FieldSettings.name``), made of the form field's at its first assignment.
    field: str = ""
    #: ``column``: the column of the file that fills it.
    column: str = ""
    #: ``field`` of type ``choice``: the form's own options; what the signer reads first (its ``/TU``, else its name).
    options: tuple[str, ...] = ()
    label: str = ""

    @property
    def variable(self) -> str:
        """What the form field becomes: the name a placed box of the same use has."""
        if self.use == "field":
            return f"{FIELD_PREFIX}{self.field}"
        if self.use == "signature":
            return SIGNATURE_VARIABLE if self.party == RECIPIENT_ROLE else f"signature_{self.party}"
        return self.column

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "options": list(self.options)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FormFieldUse:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in data.items() if k in known}, "options": tuple(data.get("options") or ())})


def form_field_uses(version: TemplateVersion) -> tuple[FormFieldUse, ...]:
    """The form fields a PDF template version assigned; none for other kinds and versions saved before."""
    return tuple(FormFieldUse.from_json(u) for u in version.pdf_form_fields or ())


def renames(stored: Iterable[Mapping[str, Any]] | None) -> tuple[tuple[str, str], ...]:
    """Each assigned form field's name → the variable it becomes, from ``TemplateVersion.pdf_form_fields``."""
    return tuple((use.name, use.variable) for use in map(FormFieldUse.from_json, stored or ()))


def renamed(fields: Iterable[FieldBox], names: Iterable[tuple[str, str]]) -> tuple[FieldBox, ...]:
    """The form's fields as a version uses them: each assigned one under the variable it became."""
    to = dict(names)
    return tuple(dataclasses.replace(f, name=to[f.name]) if f.name in to else f for f in fields)


def version_boxes(version: TemplateVersion, fields: Iterable[FieldBox]) -> tuple[FieldBox, ...]:
    """Every place a PDF template version prints something: its form's ``fields`` as assigned, then its boxes."""
    return (*renamed(fields, renames(version.pdf_form_fields)), *placed_boxes(version))


def own_fields(version: TemplateVersion) -> list[tuple[FieldBox, FormFieldUse | None]]:
    """A PDF template version's own form fields, each once (its first widget), with what staff made of it (None:
    left as it is); none for other kinds, nor for a file that can no longer be read (the template page says so)."""
    if version.kind != "pdf" or version.source_key is None:
        return []
    try:
        fields = _form_of(version.source_key).fields
    except (TemplateError, StorageError):
        return []
    uses = {u.name: u for u in form_field_uses(version)}
    first: dict[str, FieldBox] = {}
    for field in fields:
        first.setdefault(field.name, field)
    return [(field, uses.get(name)) for name, field in first.items()]


@dataclass(frozen=True)
class SignaturePlace:
    """Where a PDF template's signature goes, for the template page to draw on its page."""

    #: From 0, and the page as a viewer shows it (crop box, rotation).
    page: int
    page_box: Page
    #: The field or placed box named ``signature``, in the page's points (y upwards).
    box: FieldBox

    def percent(self) -> dict[str, float]:
        """The box as CSS percentages of the page picture (top-left origin), for an overlay on the page image."""
        page, box = self.page_box, self.box
        return {
            "left": round((box.x - page.left) / page.width * 100, 2),
            "top": round((page.bottom + page.height - box.y - box.h) / page.height * 100, 2),
            "width": round(box.w / page.width * 100, 2),
            "height": round(box.h / page.height * 100, 2),
        }


def signature_place(version: TemplateVersion) -> SignaturePlace | None:
    """The field or box a PDF template version names ``signature``; None for other kinds and for a PDF without one
    (its signature goes on a page added at the end)."""
    if version.kind != "pdf":
        return None
    assert version.source_key is not None  # a file kind's version keeps its file
    form = _form_of(version.source_key)
    boxes = version_boxes(version, form.fields)
    box = next((b for b in boxes if b.name == SIGNATURE_VARIABLE), None)
    return SignaturePlace(page=box.page, page_box=form.pages[box.page], box=box) if box else None


@functools.lru_cache(maxsize=32)
def _form_of(source_key: str) -> PdfForm:
    # Keys name immutable content: the template page reads a PDF's pages and fields once per process, not per view.
    return read_form(get_storage().get(source_key))


def assigned_fields(version: TemplateVersion) -> dict[str, dict[str, Any]]:
    """The fields a party fills that the form's own fields became (field name → its type, party, options and
    label), for ``fields.settled_fields``: the assignment decides the party and type of each."""
    return {
        use.field: {"type": use.type, "role": use.party, "options": list(use.options), "label": use.label}
        for use in form_field_uses(version)
        if use.use == "field"
    }


def check_uses(
    form: PdfForm,
    data: bytes,
    given: Sequence[Mapping[str, Any]],
    *,
    previous: Iterable[Mapping[str, Any]] | None,
) -> list[dict[str, Any]] | None:
    """Staff's assignment of the form's own fields (``name``, ``use``, ``party``, ``type``, ``column``; ``use``
    empty: left as it is), checked against the form ``data`` holds; as stored (None: nothing assigned). A field
    assigned before keeps its field's name (``previous``), so its settings carry over. TemplateError naming the first
    wrong one."""
    names = list(dict.fromkeys(f.name for f in form.fields))
    kept = {u.name: u.field for u in map(FormFieldUse.from_json, previous or ()) if u.use == "field"}
    details = _details(data)
    taken = {n for f in form.fields if (n := field_name(f.name))} | set(kept.values())
    uses: dict[str, FormFieldUse] = {}
    for raw in given:
        name = str(raw.get("name") or "")
        if name not in names:
            raise TemplateError(
                N_("The PDF has no form field “%(name)s”. Its fields: %(names)s.", name=name, names=", ".join(names))
            )
        if name in uses:
            raise TemplateError(N_("The form field “%(name)s” is given twice.", name=name))
        use = str(raw.get("use") or "")
        if not use:
            continue
        if use not in USES:
            raise TemplateError(
                N_(
                    "The form field “%(name)s” is made “%(use)s”; it can be: %(uses)s.",
                    name=name,
                    use=use,
                    uses=", ".join(USES),
                )
            )
        uses[name] = _checked(name, use, raw, details=details.get(name, ((), "")), kept=kept, taken=taken)
    return [u.to_json() for u in uses.values()] or None


def _checked(
    name: str,
    use: str,
    raw: Mapping[str, Any],
    *,
    details: tuple[tuple[str, ...], str],
    kept: Mapping[str, str],
    taken: set[str],
) -> FormFieldUse:
    if use == "column":
        column = str(raw.get("column") or "").strip()
        if not BOX_NAME.match(column) or is_mark(column):
            raise TemplateError(
                N_(
                    "The form field “%(name)s” needs the name of a column (at most 100 characters, no { } < >).",
                    name=name,
                )
            )
        return FormFieldUse(name=name, use=use, column=column)
    party = str(raw.get("party") or RECIPIENT_ROLE)
    if not _PARTY_KEY.fullmatch(party):
        raise TemplateError(
            N_("The form field “%(name)s” needs a party's key, not “%(party)s”.", name=name, party=party)
        )
    if use == "signature":
        return FormFieldUse(name=name, use=use, party=party)
    field_type = str(raw.get("type") or DEFAULT_TYPE)
    if field_type not in FORM_FIELD_TYPES:
        raise TemplateError(
            N_(
                "The form field “%(name)s” has the type “%(type)s”; it can be: %(types)s.",
                name=name,
                type=field_type,
                types=", ".join(FORM_FIELD_TYPES),
            )
        )
    options, label = details
    if field_type == "choice" and not options:
        raise TemplateError(
            N_("The form field “%(name)s” offers no options to choose from: give it another type.", name=name)
        )
    field = kept.get(name) or _new_field_name(name, taken)
    taken.add(field)
    return FormFieldUse(
        name=name,
        use=use,
        party=party,
        type=field_type,
        field=field,
        options=options if field_type == "choice" else (),
        label=label or name,
    )


def _new_field_name(name: str, taken: set[str]) -> str:
    """A field's name (``[a-z0-9_]``, at most 40 characters) made of a form field's, unlike any in ``taken``."""
    base = _NOT_IN_NAME.sub("_", name.lower()).strip("_")[: _MAX_NAME - 4] or "form_field"
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        candidate = f"{base}_{number}"
    return candidate


def _details(data: bytes) -> dict[str, tuple[tuple[str, ...], str]]:
    """Each form field's options (a choice's ``/Opt``) and the name it shows people (``/TU``), by qualified name."""
    try:
        found = PdfReader(BytesIO(data), strict=False).get_fields() or {}
    except Exception:  # noqa: BLE001 -- read_form read the file already; without its details a field is plain text
        return {}
    details = {}
    for name, field in found.items():
        options = []
        for option in field.get("/Opt") or ():
            option = option.get_object()
            # An option is its text, or [export value, text shown].
            text = option[-1] if isinstance(option, list) and option else option
            if str(text).strip():
                options.append(str(text).strip())
        details[name] = (tuple(dict.fromkeys(options)), str(field.get("/TU") or "").strip()[:200])
    return details
