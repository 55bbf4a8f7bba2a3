"""The template check staff read on the template page, in plain words: errors stop its batches from being sent,
warnings only say what will happen. Read from the saved version; nothing is rendered. (A signing order that leaves
a party out is refused when it is saved: ``template_parties.check_routing``.)"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass

from bulksign.core.config import LANGUAGES
from bulksign.core.messages import N_
from bulksign.doc_templates import pdf_forms
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.pdf_form_fields import form_field_uses
from bulksign.doc_templates.roles import pdf_role_places
from bulksign.doc_templates.template_parties import party_label, template_parties
from bulksign.doc_templates.template_sample import sample_gaps, template_sample
from bulksign.documents.field_boxes import field_name
from bulksign.documents.signature_box import RECIPIENT_ROLE, SIGNATURE_VARIABLE, mark_role
from bulksign.documents.storage import StorageError
from bulksign.models import TemplateVersion


@dataclass(frozen=True)
class TemplateCheck:
    """What the check found: ``errors`` stop sending, ``warnings`` do not."""

    errors: tuple[N_, ...] = ()
    warnings: tuple[N_, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.errors or self.warnings)


class TemplateNotReady(TemplateError):
    """A template whose check has errors: its batches cannot be sent until they are fixed."""

    status = 422


def check_template(version: TemplateVersion, *, language: str) -> TemplateCheck:
    """The version's problems with its parties, fields, order and its template's sample row (``TemplateCheck``),
    parties named in ``language``."""
    parties = template_parties(version)
    keys = [p.key for p in parties]
    errors: list[N_] = []
    warnings: list[N_] = []
    for reading in LANGUAGES:
        labels = Counter(party_label(version, role=key, language=reading).casefold() for key in keys)
        for key in keys:
            label = party_label(version, role=key, language=reading)
            if labels[label.casefold()] > 1:
                errors.append(
                    N_("Two parties are both called “%(label)s”: signers could not tell them apart.", label=label)
                )
                break
    for field in template_fields(version):
        if field.role not in keys:
            errors.append(N_("The field “%(name)s” is given to no party: choose who fills it.", name=field.shown_label))
    errors += [
        N_("Two boxes on the pages are the field %(name)s: keep one, or give each its own name.", name=name)
        for name, count in Counter(_pdf_names(version)).items()
        if count > 1
    ]
    placed = _placed_roles(version)
    for key in keys:
        if key not in placed and (key != RECIPIENT_ROLE or len(keys) > 1):
            warnings.append(
                N_(
                    "%(party)s has no signature place in the document: they sign on a page added at the end.",
                    party=party_label(version, role=key, language=language),
                )
            )
    warnings += _misspelt_marks(version, keys=keys)
    warnings += [
        N_(
            "The form field “%(name)s” is given to “%(party)s”, who is not one of the template's parties: %(instead)s "
            "fills it instead.",
            name=use.name,
            party=use.party,
            instead=party_label(version, role=RECIPIENT_ROLE, language=language),
        )
        for use in form_field_uses(version)
        if use.use == "field" and use.party not in keys
    ]
    if version.template is not None:
        warnings += sample_gaps(version, template_sample(version.template, version))
    return TemplateCheck(errors=tuple(dict.fromkeys(errors)), warnings=tuple(warnings))


def _misspelt_marks(version: TemplateVersion, *, keys: list[str]) -> list[N_]:
    """Placeholders that read as columns but look like a signature or field mark written another way
    (``{{ Signature }}``, ``{{ signatur_employer }}``, ``{{ Field_iban }}``): each with the mark meant."""
    found = []
    for variable in version.variables or ():
        if meant := meant_mark(variable, keys=keys):
            found.append(
                N_(
                    "{{ %(written)s }} is read as a column of the file, not a mark: did you mean {{ %(meant)s }}?",
                    written=variable,
                    meant=meant,
                )
            )
    return found


def meant_mark(variable: str, *, keys: list[str]) -> str:
    """The signature or field mark a column's name looks like, written another way (``Signature`` → ``signature``,
    ``signatur_employer`` → ``signature_employer`` for a party ``employer``, ``Field_iban`` → ``field_iban``); ""
    for a name that is a mark already or looks like none."""
    if mark_role(variable) or field_name(variable):
        return ""
    lowered = variable.lower()
    if lowered.startswith("field_") and field_name(lowered):
        return lowered
    marks = [SIGNATURE_VARIABLE, *(f"signature_{k}" for k in keys if k != RECIPIENT_ROLE)]
    close = difflib.get_close_matches(lowered, marks, n=1, cutoff=0.8)
    return close[0] if close else ""


def require_ready(version: TemplateVersion, *, language: str) -> None:
    """TemplateNotReady naming the first error of the version's check; nothing for a version without errors."""
    found = check_template(version, language=language)
    if found.errors:
        raise TemplateNotReady(
            N_("The template is not ready to send: %(problem)s", problem=found.errors[0]),
        )


def _placed_roles(version: TemplateVersion) -> set[str]:
    """The roles whose signature place the document marks."""
    placed = {role for v in version.variables or () if (role := mark_role(v))}
    if version.kind == "pdf":
        try:
            placed |= set(pdf_role_places(version))
        except (TemplateError, StorageError):
            pass  # the template page says the file cannot be read
    return placed


def _pdf_names(version: TemplateVersion) -> list[str]:
    """The names of a PDF template's placed boxes (each must be its own)."""
    if version.kind != "pdf":
        return []
    return [name for b in pdf_forms.placed_boxes(version) if (name := field_name(b.name))]
