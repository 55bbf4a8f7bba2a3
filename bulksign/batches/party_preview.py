"""A template as each of its parties will see it on the signing page, with the template's sample row: the document
rendered with the sample, the fields that party fills (numbered, placed and checked as the signing page shows them,
with their conditions), where they sign. Nothing is stored or sent: the request it reads is never added to the
session."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm.attributes import set_committed_value

from bulksign.batches.row_preview import MAX_PAGE_IMAGES, row_pdf
from bulksign.doc_templates.fields import SIGNED_TYPES, template_fields
from bulksign.doc_templates.kinds import field_boxes, signature_box
from bulksign.doc_templates.template_parties import party_label, template_parties
from bulksign.doc_templates.template_sample import template_sample
from bulksign.documents.document_pages import DocumentPages, page_views
from bulksign.models import Batch, Document, DocumentTemplate, SigningRequest, TemplateVersion
from bulksign.recipients.validation import Recipient
from bulksign.signing.field_entry import FieldInput, FieldPlace, form_fields, page_place
from bulksign.signing.steps import party_boxes

#: Who a sample row without the built-in columns is addressed to.
SAMPLE_EMAIL = "jane@example.com"
SAMPLE_NAME = "Jane Example"


@dataclass(frozen=True)
class PartyChoice:
    """A party as the preview names it: its key (for the address only), its label in the reader's language, its
    colour."""

    key: str
    label: str
    colour: str


@dataclass(frozen=True)
class OtherField:
    """A field another party fills: listed as theirs, never as the previewed party's to fill."""

    label: str
    party: str


@dataclass(frozen=True)
class PartyPreview:
    party: PartyChoice
    #: The document as rendered with the sample row, for its page images.
    pdf: bytes
    #: Its pages (at most ``MAX_PAGE_IMAGES``) and their text, as the signing page shows them.
    pages: DocumentPages
    #: The fields this party fills, as the signing page lists and places them.
    fields: tuple[FieldInput, ...]
    others: tuple[OtherField, ...]
    #: Where this party signs on the pages; None: on a signature page added at the end.
    sign_place: FieldPlace | None


def party_choices(version: TemplateVersion, *, language: str) -> tuple[PartyChoice, ...]:
    """Every party of ``version``, in the template's order, named in ``language``."""
    return tuple(
        PartyChoice(key=p.key, label=party_label(version, role=p.key, language=language), colour=p.colour)
        for p in template_parties(version)
    )


def sample_pdf(template: DocumentTemplate, version: TemplateVersion, *, language: str, timeout: float) -> bytes:
    """``version``'s document rendered with ``template``'s sample row (kept in memory a while for its page images);
    ``BulksignError`` when the template or the converter refuses the sample."""
    sample = template_sample(template, version)
    recipient = Recipient(
        row_number=0,
        email=sample.get("email") or SAMPLE_EMAIL,
        name=sample.get("name") or SAMPLE_NAME,
        phone=sample.get("phone") or None,
        data=sample,
    )
    return row_pdf(version, recipient, language=language, timeout=timeout)


def party_preview(
    template: DocumentTemplate, version: TemplateVersion, *, role: str, language: str, timeout: float
) -> PartyPreview | None:
    """What ``role`` reads, fills and where they sign on a document of ``version`` made from ``template``'s sample
    row; None for a role that does not sign it. ``BulksignError`` when the sample cannot be rendered or read."""
    choices = {c.key: c for c in party_choices(version, language=language)}
    if role not in choices:
        return None
    sample = template_sample(template, version)
    pdf = sample_pdf(template, version, language=language, timeout=timeout)
    pages = DocumentPages(document_id=0, pages=page_views(pdf)[:MAX_PAGE_IMAGES])
    recipient_box = signature_box(version, pdf)
    original = Document(
        field_boxes={name: box.to_json() for name, box in field_boxes(version, pdf).items()},
        signature_box=recipient_box.to_json() if recipient_box is not None else None,
    )
    request = _sample_request(version, sample=sample, language=language)
    places = party_boxes(request=request, original=original, pdf=pdf)
    place = places.get(role)
    others = tuple(
        OtherField(label=f.shown_label, party=choices[f.role].label if f.role in choices else f.role)
        for f in template_fields(version)
        if f.role != role and f.type not in SIGNED_TYPES
    )
    return PartyPreview(
        party=choices[role],
        pdf=pdf,
        pages=pages,
        fields=form_fields(request, role=role, document=original, pages=pages, earlier={}),
        others=others,
        sign_place=page_place(place.to_json(), pages) if place is not None else None,
    )


def _sample_request(version: TemplateVersion, *, sample: dict[str, str], language: str) -> SigningRequest:
    """A request of the sample row in a batch of ``version``, as the signing page's code reads one; never added to
    the session (its relationships are set without the events that would add it)."""
    batch = Batch(language=language)
    set_committed_value(batch, "template_version", version)
    request = SigningRequest(data=sample, email=sample.get("email") or SAMPLE_EMAIL, name=sample.get("name") or "")
    set_committed_value(request, "batch", batch)
    return request
