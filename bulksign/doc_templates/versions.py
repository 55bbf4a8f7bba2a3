"""Templates and their immutable versions: the save flow that extracts the variables and checks the template or
upload (``kinds``), the boxes placed on a PDF template, and the settings of the fields its signer fills."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import literal, select, tuple_
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates import kinds as template_kinds
from bulksign.doc_templates import pdf_fill, pdf_form_fields, pdf_forms
from bulksign.doc_templates.errors import TemplateBroken, TemplateError
from bulksign.doc_templates.fields import settled_fields
from bulksign.doc_templates.html_safety import check_html_safety
from bulksign.doc_templates.jinja_sandbox import render_html, render_text
from bulksign.doc_templates.mail_texts import (
    DEFAULT_EMAIL_BODY,
    DEFAULT_EMAIL_SUBJECT,
    DEFAULT_REMINDER_BODY,
    DEFAULT_REMINDER_SUBJECT,
    MAIL_FIELDS,
    current_text,
)
from bulksign.doc_templates.roles import marked_roles
from bulksign.doc_templates.template_parties import (
    check_parties,
    check_routing,
    template_parties,
    template_routing,
)
from bulksign.doc_templates.variables import extract_variables, sample_row
from bulksign.documents.signature_box import MAX_MARKS, SIGNATURE_VARIABLE, mark_role
from bulksign.documents.storage import get_storage
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import DocumentTemplate, TemplateVersion, User
from bulksign.people import access

logger = logging.getLogger(__name__)

#: Longest template and mail text a version may have: a 45 MB ``html`` field took a web worker 15 s to check.
MAX_TEMPLATE_CHARS = 2_000_000
MAX_MAIL_TEXT_CHARS = 100_000


@dataclass(frozen=True)
class SavedVersion:
    template: DocumentTemplate
    version: TemplateVersion
    #: What was taken out of the uploaded file (a PDF's active content: ``pdf_cleaning.REMOVED``), to tell staff.
    removed: tuple[N_, ...] = ()


def create_template(
    session: Session,
    *,
    name: str,
    html: str,
    user: User | None,
    now: datetime,
    email_subject: str = DEFAULT_EMAIL_SUBJECT,
    email_body: str = DEFAULT_EMAIL_BODY,
    reminder_subject: str = DEFAULT_REMINDER_SUBJECT,
    reminder_body: str = DEFAULT_REMINDER_BODY,
    team_id: int | None = None,
    kind: str = "html",
    file: bytes | None = None,
    field_hints: dict[str, dict[str, str]] | None = None,
) -> SavedVersion:
    """A new template with its first version, shared with ``team_id`` (default: the user's first team).

    ``kind`` other than ``html``: the document is ``file`` (a .docx …), see ``save_version``."""
    if user is not None:
        access.require_creator(user)
    name = name.strip()
    if not name:
        raise TemplateError(N_("Give the template a name."))
    if CONTROL_CHARACTERS.search(name):  # the name goes into the subject of confirmations and invitations
        raise TemplateError(N_("The template name may not contain line breaks or other control characters."))
    try:
        team_id = access.team_for_new(session, user=user, team_id=team_id) if user is not None else team_id
    except access.Refused as exc:
        raise TemplateError(exc.message) from None
    template = DocumentTemplate(
        name=name[:200], created_by_id=user.id if user else None, team_id=team_id, created_at=now
    )
    session.add(template)
    session.flush()
    return save_version(
        session,
        template=template,
        html=html,
        user=user,
        now=now,
        email_subject=email_subject,
        email_body=email_body,
        reminder_subject=reminder_subject,
        reminder_body=reminder_body,
        kind=kind,
        file=file,
        field_hints=field_hints,
    )


def save_version(
    session: Session,
    *,
    template: DocumentTemplate,
    html: str,
    user: User | None,
    now: datetime,
    email_subject: str,
    email_body: str,
    reminder_subject: str,
    reminder_body: str,
    kind: str = "html",
    file: bytes | None = None,
    pdf_boxes: list[dict[str, Any]] | None = None,
    form_fields: list[dict[str, Any]] | None = None,
    fields: list[dict[str, Any]] | None = None,
    parties: list[dict[str, Any]] | None = None,
    routing: list[list[str]] | None = None,
    field_hints: dict[str, dict[str, str]] | None = None,
) -> SavedVersion:
    """Insert the next immutable version of ``template``; Refused(403) for a user who may only use it.

    For a file kind (``docx``, ``pdf``) the document is ``file``, checked and kept in storage; without a
    new file, the version keeps the previous version's file of the same kind (a change of the mail texts)
    and, for a PDF, the boxes placed on it. ``pdf_boxes``: a new placement of boxes on the PDF's pages;
    ``form_fields``: a new assignment of its form's own fields (``pdf_form_fields.check_uses``).
    ``fields``: settings of the fields the signer fills (``fields.check_settings``); None keeps the previous
    version's settings of the fields still marked. ``parties`` (``template_parties.check_parties``) and ``routing``
    (a list of steps of party keys): None keeps the previous version's. ``field_hints``: the type and party of
    fields new to this version, as the palette inserted them (name → ``{"type", "role"}``)."""
    if user is not None and not access.may_edit_template(session, template=template, user=user):
        raise access.Refused(N_("Only the template's owner, a manager of its team or an admin can change it."), 403)
    # Stored as the web form's \r\n or as the API's \n alike, and an earlier release's default as today's, so a kept
    # default text is its message id (``mail_text``).
    email_subject, email_body, reminder_subject, reminder_body = (
        current_text(text=t) for t in (email_subject, email_body, reminder_subject, reminder_body)
    )
    subjects = ((N_("email subject"), email_subject), (N_("reminder subject"), reminder_subject))
    mail_texts = (subjects[0], (N_("email body"), email_body), subjects[1], (N_("reminder body"), reminder_body))
    for label, text in mail_texts:
        if len(text) > MAX_MAIL_TEXT_CHARS:
            raise TemplateError(
                N_(
                    "The %(label)s has %(n)s characters; the limit is %(limit)s.",
                    label=label,
                    n=f"{len(text):,}",
                    limit=f"{MAX_MAIL_TEXT_CHARS:,}",
                )
            )
    for label, text in subjects:
        if CONTROL_CHARACTERS.search(text):  # each is the Subject field of every mail made from it
            raise TemplateError(
                N_("The %(label)s may not contain line breaks or other control characters.", label=label)
            )
    source_key = placed = own = None
    removed: tuple[N_, ...] = ()
    if kind == "html":
        variables = _html_variables(html)
    else:
        html = ""
        variables, source_key, placed, own, removed = _file_variables(
            session, template=template, kind=kind, file=file, pdf_boxes=pdf_boxes, form_fields=form_fields
        )
    if sum(1 for v in variables if mark_role(v)) > MAX_MARKS:  # each mark is framed in a shade of its own
        raise TemplateError(N_("A template may mark at most %(n)s signatures.", n=MAX_MARKS))
    for label, text in mail_texts:
        try:
            _check_renders(text, extract_variables(text), render=render_text)
        except TemplateError as exc:
            raise TemplateError(
                N_("%(label)s: %(message)s", label=label, message=exc.message),
                exc.line,
                hint=exc.hint,
                excerpt=exc.excerpt,
            ) from None
    previous = get_version(session, template_id=template.id)
    template.latest_version += 1
    version = TemplateVersion(
        template_id=template.id,
        version=template.latest_version,
        kind=kind,
        html=html,
        source_key=source_key,
        pdf_boxes=placed,
        pdf_form_fields=own,
        variables=variables,
        email_subject=email_subject,
        email_body=email_body,
        reminder_subject=reminder_subject,
        reminder_body=reminder_body,
        created_by_id=user.id if user else None,
        created_at=now,
    )
    _settle_parties(version, previous=previous, parties=parties, routing=routing)
    version.fields = settled_fields(
        version,
        roles=version.roles,
        routing=template_routing(version),
        given=fields,
        previous=previous,
        hints=field_hints,
        assigned=pdf_form_fields.assigned_fields(version),
    )
    session.add(version)
    session.flush()
    log(logger, logging.INFO, "template version saved", template_id=template.id, version=version.version)
    if removed:
        log(
            logger,
            logging.INFO,
            "active content taken out of an uploaded template",
            template_id=template.id,
            version=version.version,
            removed=[label.english for label in removed],
        )
    return SavedVersion(template=template, version=version, removed=removed)


def _settle_parties(
    version: TemplateVersion,
    *,
    previous: TemplateVersion | None,
    parties: list[dict[str, Any]] | None,
    routing: list[list[str]] | None,
) -> None:
    """The roles, parties and order of a version being saved: the document's marked roles, then any other party
    staff keep (it signs on the signature page); given parties and order checked, else the previous version's."""
    marked = marked_roles(version)
    if parties is not None:
        kept = check_parties(parties, marked=marked)
    elif previous is not None and previous.parties is not None:
        kept = list(template_parties(previous))
    else:
        kept = []
    version.roles = [*marked, *(p.key for p in kept if p.key not in marked)]
    version.parties = [p.to_json() for p in kept] or None
    if version.parties is not None:
        version.parties = [p.to_json() for p in template_parties(version)]
    if routing is not None:
        version.routing = check_routing(routing, keys=version.roles)
    elif previous is not None and previous.routing is not None:
        version.routing = previous.routing
        version.routing = template_routing(version)


class NotPdfTemplate(TemplateError):
    """Boxes were placed on, or asked of, a template whose newest version is not a PDF."""


def _newest_pdf_version(session: Session, *, template: DocumentTemplate) -> TemplateVersion:
    """The template's newest version, which must be a PDF's; NotPdfTemplate otherwise."""
    version = get_version(session, template_id=template.id)
    if version is None or version.kind != "pdf":
        raise NotPdfTemplate(N_("Boxes can only be placed on a PDF template; upload a PDF as a new version first."))
    return version


def place_boxes(
    session: Session,
    *,
    template: DocumentTemplate,
    boxes: list[dict[str, Any]] | None,
    user: User | None,
    now: datetime,
    form_fields: list[dict[str, Any]] | None = None,
) -> SavedVersion:
    """The next version of a PDF template with ``boxes`` (``pdf_forms.check_boxes``; None: the placed ones kept) and
    ``form_fields``, what its form's own fields are made (``pdf_form_fields.check_uses``; None: kept); its file and
    mail texts are kept. NotPdfTemplate when the newest version is of another kind."""
    version = _newest_pdf_version(session, template=template)
    kept = _kept(version)
    return save_version(
        session, template=template, pdf_boxes=boxes, form_fields=form_fields, user=user, now=now, **kept
    )


def _kept(version: TemplateVersion) -> dict[str, Any]:
    """What the next version keeps of ``version`` when only its boxes or fields change: its document (a file
    kind's file is kept by giving none) and mail texts, as ``save_version`` takes them."""
    return {"html": version.html, "kind": version.kind, "file": None, **{f: getattr(version, f) for f in MAIL_FIELDS}}


def save_fields(
    session: Session, *, template: DocumentTemplate, fields: list[dict[str, Any]], user: User | None, now: datetime
) -> SavedVersion:
    """The next version of a template with ``fields`` as the settings of the fields its signer fills
    (``fields.check_settings``: FieldSettingsError names a wrong one); its document, boxes and mail texts kept."""
    version = get_version(session, template_id=template.id)
    assert version is not None  # a template has its first version from its creation
    return save_version(session, template=template, fields=fields, user=user, now=now, **_kept(version))


def save_parties(
    session: Session,
    *,
    template: DocumentTemplate,
    parties: list[dict[str, Any]],
    routing: list[list[str]] | None,
    user: User | None,
    now: datetime,
) -> SavedVersion:
    """The next version of a template with ``parties`` and the signing order ``routing`` (None: the previous
    version's, fitted to the parties); its document, boxes, fields and mail texts kept. PartiesError names a wrong
    party."""
    version = get_version(session, template_id=template.id)
    if version is None:
        raise TemplateError(N_("Save the template's document first."))
    return save_version(
        session, template=template, parties=parties, routing=routing, user=user, now=now, **_kept(version)
    )


@dataclass(frozen=True)
class PdfLayout:
    """A PDF template's newest version as the box editor sees it: its pages, its form's own fields, placed boxes."""

    version: TemplateVersion
    #: The pages (crop box, rotation) and the form's fields, which stay where the file has them.
    form: pdf_forms.PdfForm
    #: The boxes staff placed, as ``place_boxes`` took them.
    boxes: tuple[pdf_forms.FieldBox, ...]


def pdf_layout(session: Session, *, template: DocumentTemplate) -> PdfLayout:
    """The pages, form fields and placed boxes of a PDF template's newest version; NotPdfTemplate for another kind."""
    version = _newest_pdf_version(session, template=template)
    assert version.source_key is not None  # a file kind's version keeps its file
    return PdfLayout(
        version=version,
        form=pdf_forms.read_form(get_storage().get(version.source_key)),
        boxes=pdf_forms.placed_boxes(version),
    )


def _html_variables(html: str) -> list[str]:
    if not html.strip():
        raise TemplateError(N_("The template is empty."))
    if len(html) > MAX_TEMPLATE_CHARS:
        raise TemplateError(
            N_(
                "The template has %(n)s characters; the limit is %(limit)s. Embed smaller images, or "
                "link fewer of them.",
                n=f"{len(html):,}",
                limit=f"{MAX_TEMPLATE_CHARS:,}",
            )
        )
    variables = extract_variables(html)
    check_html_safety(html)
    _check_renders(html, variables, render=render_html)
    return variables


def _file_variables(
    session: Session,
    *,
    template: DocumentTemplate,
    kind: str,
    file: bytes | None,
    pdf_boxes: list[dict[str, Any]] | None,
    form_fields: list[dict[str, Any]] | None,
) -> tuple[list[str], str, list[dict[str, Any]] | None, list[dict[str, Any]] | None, tuple[N_, ...]]:
    """The variables, storage key, placed boxes and form fields' assignment of a file kind's version, and what was
    taken out of its file: the new file, cleaned (no boxes or assignment yet), or the previous version's file, boxes
    and assignment; ``pdf_boxes`` replaces the boxes, ``form_fields`` the assignment."""
    if file is None:
        previous = get_version(session, template_id=template.id)
        if previous is None or previous.kind != kind or previous.source_key is None:
            raise TemplateError(
                N_("Upload the template file (%(extension)s).", extension=template_kinds.file_kind(kind).extensions[0])
            )
        variables, key, placed = list(previous.variables), previous.source_key, previous.pdf_boxes
        own = previous.pdf_form_fields
        removed: tuple[N_, ...] = ()
    else:
        checked = template_kinds.check_file(kind=kind, data=file)
        file, variables, removed = checked.data, checked.variables, checked.removed
        key = template_kinds.source_key(template_id=template.id, kind=kind, data=file)
        get_storage().put(key, file, content_type=template_kinds.file_kind(kind).content_type)
        placed = own = None
    if pdf_boxes is not None or form_fields is not None:
        if kind != "pdf":
            raise TemplateError(N_("Boxes can only be placed on a PDF template."))
        data = file if file is not None else get_storage().get(key)
        if form_fields is not None:
            own = pdf_form_fields.check_uses(pdf_forms.read_form(data), data, form_fields, previous=own)
        boxes = pdf_boxes if pdf_boxes is not None else list(placed or ())
        variables, placed = pdf_fill.place(data, boxes, own=pdf_form_fields.renames(own))
    return variables, key, placed, own, removed


def list_templates(
    session: Session,
    *,
    user: User,
    include_archived: bool = False,
    after: tuple[str, int] | None = None,
    limit: int | None = None,
) -> list[DocumentTemplate]:
    """The templates ``user`` may see, by name, for the list page and the API (keyset pages after (name, id))."""
    query = (
        select(DocumentTemplate)
        .where(access.template_filter(user))
        .order_by(DocumentTemplate.name, DocumentTemplate.id)
        .limit(limit)
    )
    if not include_archived:
        query = query.where(DocumentTemplate.archived.is_(False))
    if after is not None:
        query = query.where(
            tuple_(DocumentTemplate.name, DocumentTemplate.id) > tuple_(literal(after[0]), literal(after[1]))
        )
    return list(session.scalars(query))


def get_version(session: Session, *, template_id: int, version: int | None = None) -> TemplateVersion | None:
    """One version of a template (the newest when ``version`` is None), or None."""
    query = select(TemplateVersion).where(TemplateVersion.template_id == template_id)
    if version is None:
        query = query.order_by(TemplateVersion.version.desc()).limit(1)
    else:
        query = query.where(TemplateVersion.version == version)
    return session.scalar(query)


def _check_renders(source: str, variables: list[str], *, render: Callable[[str, dict[str, Any]], str]) -> None:
    """Refuse at save a template that cannot be filled in for any row (``{{ 1/0 }}``, ``{{ salary / 12 }}``: the
    file's values are text), with the line and a hint; the preview of one showed the app's error page.

    Filled in twice: with the preview's sample values, then with ``1`` for each variable, so that a calculation
    only numbers can make (``{{ total|int / count|int }}``) is not refused for ``[count]`` making 0. Too costly or
    broken is refused at once, whatever the values."""
    try:
        render(source, sample_row(variables))
    except TemplateBroken:
        raise
    except TemplateError as first:
        try:
            render(source, {**sample_row(variables), **{v: "1" for v in variables if v != SIGNATURE_VARIABLE}})
        except TemplateError:
            raise first from None
