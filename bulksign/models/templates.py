"""Document template tables: the named template and its immutable versions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import Model, UTCDateTime, utcnow


class DocumentTemplate(Model):
    """A named template; its content lives in immutable ``TemplateVersion`` rows."""

    __tablename__ = "document_templates"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(db.String(200))
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    #: The team that shares it; None: only its creator (and admins) see it.
    team_id: Mapped[int | None] = mapped_column(db.ForeignKey("teams.id", ondelete="SET NULL"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: The newest version, denormalised for the list page.
    latest_version: Mapped[int] = mapped_column(default=0)
    archived: Mapped[bool] = mapped_column(default=False)
    #: A sample row staff edit on the template page (column → value), which the parties' previews are rendered
    #: with; None: one made from the newest version's columns (``template_sample.template_sample``).
    sample: Mapped[dict | None] = mapped_column(JSON)

    versions: Mapped[list[TemplateVersion]] = relationship(
        back_populates="template", order_by="TemplateVersion.version"
    )


class TemplateVersion(Model):
    """One saved state of a template. Never updated: editing inserts a new version."""

    __tablename__ = "template_versions"
    __table_args__ = (UniqueConstraint("template_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    template_id: Mapped[int] = mapped_column(db.ForeignKey("document_templates.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column()
    #: ``html`` (the ``html`` column is the document), ``docx`` or ``pdf`` (an uploaded file, ``source_key``);
    #: ``bulksign.doc_templates.kinds`` renders each kind.
    kind: Mapped[str] = mapped_column(db.String(16), default="html", server_default="html")
    #: The document as HTML with ``{{ variable }}`` placeholders (Jinja, rendered in a sandbox); empty for files.
    html: Mapped[str] = mapped_column(db.Text)
    #: Storage key of the uploaded file (Word, PDF) as it was uploaded; None for HTML. Named by its sha256,
    #: so versions that keep the same file share it.
    source_key: Mapped[str | None] = mapped_column(db.String(500))
    #: Variable names the document uses, extracted at save time.
    variables: Mapped[list] = mapped_column(JSON, default=list)
    #: PDF templates: boxes staff placed on the pages (``pdf_forms.FieldBox.to_json()`` each: column, page, place in
    #: points, font size), filled like form fields; None for other kinds and for PDFs filled by their own fields.
    pdf_boxes: Mapped[list | None] = mapped_column(JSON)
    #: PDF templates: what staff made of the form's own fields (``pdf_form_fields.FormFieldUse.to_json()`` each: the
    #: field's name, and a field a party fills, a party's signature or a column of the file); a field not listed is
    #: filled by its own name, as before. None for other kinds and for PDFs whose fields were never assigned.
    pdf_form_fields: Mapped[list | None] = mapped_column(JSON)
    #: The roles that sign its documents, in the order of their marks (``roles.marked_roles``), written at save:
    #: ``["recipient"]`` for a single-signer version, and for every version saved before roles were read (one that
    #: used ``{{ signature_date }}`` as a column keeps it a column).
    roles: Mapped[list] = mapped_column(JSON, default=lambda: ["recipient"], server_default=text("'[\"recipient\"]'"))
    #: The fields its signer fills, in the order the document marks them (``{{ field_<name> }}``):
    #: ``fields.FieldSettings.to_json()`` each (name, type, label, required, checks, party), written at save; None
    #: for a version saved before fields were read (a ``{{ field_x }}`` there stays a column of its file).
    fields: Mapped[list | None] = mapped_column(JSON)
    #: Who signs, as people read it: ``template_parties.PartyDef.to_json()`` each (key, label per language, colour,
    #: who by default), in the template's order; None for a version saved before parties were kept (its parties
    #: are derived from ``roles``).
    parties: Mapped[list | None] = mapped_column(JSON)
    #: The signing order batches start from: a list of steps, each a list of party keys signing in parallel; None:
    #: the recipient first, then one step per other party.
    routing: Mapped[list | None] = mapped_column(JSON)
    #: Why its documents are rendered one by one, found by a run of them that failed its check (``documents.together``):
    #: ``{"msgid", "values", "at", "batch_id"}``, the message translated when shown; None while nothing was found.
    #: Written once, by the first run that finds it; the version's content never changes.
    render_alone: Mapped[dict | None] = mapped_column(JSON)
    #: Invitation and reminder mail, as templates too.
    email_subject: Mapped[str] = mapped_column(db.Text, default="")
    email_body: Mapped[str] = mapped_column(db.Text, default="")
    reminder_subject: Mapped[str] = mapped_column(db.Text, default="")
    reminder_body: Mapped[str] = mapped_column(db.Text, default="")
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    template: Mapped[DocumentTemplate] = relationship(back_populates="versions")


class ColumnMapping(Model):
    """The columns a team last matched for a template's files (template column → the file's headers), offered the
    next time one of its files does not name them as the template does."""

    __tablename__ = "column_mappings"
    __table_args__ = (UniqueConstraint("template_id", "team_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    template_id: Mapped[int] = mapped_column(db.ForeignKey("document_templates.id", ondelete="CASCADE"))
    #: The template's team when it was confirmed; None: a template only its creator uses.
    team_id: Mapped[int | None] = mapped_column(db.ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    #: ``column_mapping.ColumnMapping.to_json()``.
    columns: Mapped[dict] = mapped_column(JSON, default=dict)
    updated_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WordCheck(Model):
    """A Word file checked before (or after) it is saved as a template: rendered with a sample row by a job, each tag
    found on the pages (``doc_templates.word_check``). Seen only by the one who started it."""

    __tablename__ = "word_checks"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: The template whose parties and fields the check reads; None for a file not saved yet.
    template_id: Mapped[int | None] = mapped_column(db.ForeignKey("document_templates.id", ondelete="CASCADE"))
    #: The .docx checked, in storage (named by its content).
    source_key: Mapped[str] = mapped_column(db.String(500))
    #: The sample row the pages are rendered with: column → value, as staff edited it.
    sample: Mapped[dict] = mapped_column(JSON, default=dict)
    #: ``word_check.CheckStatus``.
    status: Mapped[str] = mapped_column(db.String(16), default="pending")
    #: What was found (``word_check.Examined.to_json()``); None until the job is done.
    result: Mapped[dict | None] = mapped_column(JSON)
    #: Why it failed: ``{"msgid", "values"}``, translated when shown.
    error: Mapped[dict | None] = mapped_column(JSON)
    #: The sample pages as a PDF, in storage, which the page images are drawn from.
    pdf_key: Mapped[str | None] = mapped_column(db.String(500))
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
