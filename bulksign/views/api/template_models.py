"""The shapes the templates API reads and answers: a template, its PDF's boxes and its fields (their schemas are the
API's description of them)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from flask import current_app
from pydantic import BaseModel, ConfigDict, Field

from bulksign.core.config import LANGUAGES
from bulksign.core.schemas import ABSENT, Text, no_null_defaults
from bulksign.doc_templates import pdf_forms
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates.columns import OPTIONAL, needed_columns
from bulksign.doc_templates.field_conditions import ConditionIn
from bulksign.doc_templates.fields import (
    FIELD_TYPES,
    MAX_LABEL_CHARS,
    MAX_OPTIONS,
    MAX_PATTERN_CHARS,
    template_fields,
)
from bulksign.doc_templates.pdf_form_fields import FORM_FIELD_TYPES, USES, own_fields
from bulksign.doc_templates.render_path import render_path
from bulksign.doc_templates.roles import template_roles
from bulksign.doc_templates.template_check import check_template
from bulksign.doc_templates.template_parties import MAX_LABEL_CHARS as MAX_PARTY_LABEL_CHARS
from bulksign.doc_templates.template_parties import template_parties, template_routing
from bulksign.doc_templates.template_sample import MAX_SAMPLE_CHARS, MAX_SAMPLE_COLUMNS, template_sample
from bulksign.documents.field_boxes import MAX_FIELDS
from bulksign.documents.signature_box import MAX_MARKS, RECIPIENT_ROLE
from bulksign.models import DocumentTemplate, TemplateVersion
from bulksign.views.api.common import NextCursor, RecordId

# Literals of computed values: mypy sees the plain type, pydantic (and the API's description) the values.
if TYPE_CHECKING:
    FormFieldUseName = str
    FormFieldType = str
else:
    FormFieldUseName = Literal[("", *USES)]
    FormFieldType = Literal[FORM_FIELD_TYPES]


class FormFieldIn(BaseModel):
    """What one of a PDF form's own fields is made."""

    model_config = ConfigDict(extra="forbid")
    name: Text = Field(min_length=1, max_length=1000, description="The form field's name (`form_fields[].name`).")
    use: FormFieldUseName = Field(
        "",
        description="`field`: a field `party` fills in on their signing page (of `type`); `signature`: `party`'s "
        "signature goes there; `column`: the file's `column` fills it; empty: as it is, the column of its own name.",
    )
    party: Text = Field(RECIPIENT_ROLE, max_length=40, description="`field` and `signature`: the party's key.")
    type: FormFieldType = Field(
        "text", description="`field`: what the party gives; `choice` offers the form field's own options."
    )
    column: Text = Field("", max_length=100, description="`column`: the column's name.")


class FormFieldOut(FormFieldIn):
    page: int = Field(description="1 for the first.")
    x: float = Field(description="Points from the page's left edge, as `GET .../boxes` gives them.")
    y: float = Field(description="Points up from the page's bottom edge.")
    width: float
    height: float
    field: str = Field(
        description="`field`: the name of the field it became, as `GET .../fields` lists it with its settings."
    )


class FormFieldsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    form_fields: list[FormFieldIn] = Field(
        max_length=pdf_forms.MAX_FIELDS,
        description="What the form's own fields are made: the whole assignment (a field left out stays as it is).",
    )


class TemplateOut(BaseModel):
    id: int
    name: str
    version: int = Field(description="The newest version's number; batches use the newest version.")
    team_id: int | None
    kind: str | None = Field(description="`html`, `docx` or `pdf`: what the newest version was made from.")
    variables: list[str] = Field(
        description="The `{{ placeholders }}` (or PDF fields) of the newest version; `required` and `optional` "
        "say which columns a recipients file must fill (besides `email`)."
    )
    roles: list[str] = Field(
        description="Who signs each document, in the order of their marks in the newest version: `recipient` (the "
        "row's own, `{{ signature }}`, first when unmarked) and each `<role>` of a `{{ signature_<role> }}` mark "
        "(a PDF's field or box `signature_<role>`)."
    )
    required: list[str] = Field(
        description="Columns every row must fill: printed whatever the row holds by the document or the mail."
    )
    optional: list[str] = Field(
        description="Columns used only under a condition, in a test or with a default, and each field's prefill "
        "column `field_<name>` (see `GET .../fields`): a file may leave them out or empty."
    )
    render_together: bool | None = Field(
        description="Whether the newest version's documents are rendered many in one run of the renderer, each "
        "checked to hold its own recipient's data only (the fast way); false: one by one, `render_alone_reason` "
        "says why and what to change."
    )
    render_alone_reason: str | None = Field(description="Why the documents are rendered one by one, in words.")
    form_fields: list[FormFieldOut] = Field(
        description="A PDF form's own fields, each once, with what each is made (`PUT .../form-fields`); empty for "
        "HTML and Word."
    )
    sample: dict[str, str] = Field(
        description="The sample row the parties' previews are rendered with (column → value), as `PUT .../sample` "
        "takes it; until one is saved, values made up from the columns' names."
    )
    created_at: datetime


class PartyIn(BaseModel):
    """One party of a template: who signs, as people read it."""

    model_config = ConfigDict(extra="forbid")
    key: Text = Field(
        min_length=1,
        max_length=40,
        description="`recipient` (the row's own person) or a word of lowercase letters, digits and `_`: the "
        "`{{ signature_<key> }}` mark, the file's `<key>_email` column and the batch's `parties` name it. Never "
        "shown to a signer.",
    )
    labels: dict[Text, Text] = Field(
        {},
        max_length=len(LANGUAGES),
        description=f"Language ({', '.join(f'`{code}`' for code in LANGUAGES)}) → what signers and staff read, "
        f"at most {MAX_PARTY_LABEL_CHARS} characters; a language left out reads a default made from the key.",
    )
    colour: Text = Field("", max_length=7, description="`#rrggbb`; empty: the next of the palette.")
    source: Text = Field(
        "",
        description="Who signs by default: `row` (the recipient only), `columns` (a person per row, the "
        "`<key>_email` columns) or `fixed` (one person, `name` and `email`; a batch may name another).",
    )
    name: Text = Field("", max_length=300, description="`fixed`: the person's name.")
    email: Text = Field("", max_length=254, description="`fixed`: the person's address.")


class SampleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sample: dict[
        Annotated[Text, Field(min_length=1, max_length=80)], Annotated[Text, Field(max_length=MAX_SAMPLE_CHARS)]
    ] = Field(
        max_length=MAX_SAMPLE_COLUMNS,
        description="Column → value: the row the parties' previews show. It replaces the saved one; no batch uses "
        "it. A column the template uses left out or empty is a warning of the template check.",
    )


class PartiesBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    parties: list[PartyIn] = Field(
        max_length=MAX_MARKS,
        description="Every party, in the template's order (the recipient added first when left out); a party the "
        "document marks must be among them.",
    )
    routing: list[list[Text]] | None = Field(
        None,
        max_length=MAX_MARKS,
        description="The signing order batches start from: steps of party keys who sign at the same time, every "
        "party in one step. Null: the previous order, each new party a step at the end.",
    )


class CheckOut(BaseModel):
    errors: list[str] = Field(description="What stops the template's batches from being sent, in words.")
    warnings: list[str] = Field(description="What will happen that staff may not expect, in words.")


class PartiesOut(BaseModel):
    version: int = Field(description="The newest version, which these parties belong to.")
    parties: list[PartyIn]
    routing: list[list[str]] = Field(description="The signing order batches start from, as `PUT` takes it.")
    check: CheckOut = Field(description="The template check, in English.")


class TemplatePage(NextCursor):
    items: list[TemplateOut]


class TemplateBody(BaseModel):
    name: Text = Field(min_length=1, max_length=200)
    html: Text = Field(
        max_length=dt.MAX_TEMPLATE_CHARS, description="The document, HTML with Jinja `{{ placeholders }}` (sandboxed)."
    )
    team_id: RecordId | None = Field(None, description="The team that shares it; default: your first team.")
    email_subject: Text | None = Field(None, max_length=500)
    email_body: Text | None = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)
    reminder_subject: Text | None = Field(None, max_length=500)
    reminder_body: Text | None = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)


class TemplateForm(BaseModel):
    """The same template as an uploaded file: .html, a Word .docx or a (fillable) PDF."""

    # Multipart fields are left out, never null; unknown ones are refused.
    model_config = ConfigDict(extra="forbid", json_schema_extra=no_null_defaults)
    FILE_CONTENT_TYPES: ClassVar[str] = (
        "text/html, application/vnd.openxmlformats-officedocument.wordprocessingml.document, application/pdf"
    )
    name: Text = Field(min_length=1, max_length=200)
    file: bytes = Field(
        description="The document: .html, .docx with `{{ placeholders }}`, or a PDF whose form fields name the columns."
    )
    team_id: RecordId = Field(ABSENT, description="The team that shares it; default: your first team.")
    email_subject: Text = Field(ABSENT, max_length=500)
    email_body: Text = Field(ABSENT, max_length=dt.MAX_TEMPLATE_CHARS)
    reminder_subject: Text = Field(ABSENT, max_length=500)
    reminder_body: Text = Field(ABSENT, max_length=dt.MAX_TEMPLATE_CHARS)


#: The largest page a PDF may have (PDF 32000-1, annex C: 14,400 units): no box lies beyond it.
MAX_POINTS = 14_400.0


class BoxIn(BaseModel):
    """One box on a page, in PDF points (1/72 inch) of the page's own coordinates, as its form fields have them:
    from the lower-left corner, y upwards (for the rare page whose crop box is offset, as offset as that box)."""

    # NaN and infinity are refused as such ("a finite number"), not with a range that NaN is merely outside of.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    variable: Text = Field(
        min_length=1,
        max_length=100,
        description="The column whose value is printed in the box; `signature`: where the "
        "signature block goes (at most one).",
    )
    page: int = Field(ge=1, le=pdf_forms.MAX_PAGES, description="The page, 1 for the first.")
    x: float = Field(ge=-MAX_POINTS, le=MAX_POINTS, description="Left edge, points from the page's left edge.")
    y: float = Field(ge=-MAX_POINTS, le=MAX_POINTS, description="Bottom edge, points up from the page's bottom edge.")
    width: float = Field(gt=0, le=MAX_POINTS, description=f"Points; at least {pdf_forms.MIN_BOX_SIDE:g}.")
    height: float = Field(
        gt=0,
        le=MAX_POINTS,
        description=f"Points; at least {pdf_forms.MIN_BOX_SIDE:g}. A box at least 2.4 font "
        "sizes tall wraps its text over several lines.",
    )
    font_size: float = Field(
        0,
        ge=0,
        le=pdf_forms.MAX_FONT_SIZE,
        description=f"Points, {pdf_forms.MIN_FONT_SIZE:g} to {pdf_forms.MAX_FONT_SIZE:g}; 0 fits the text to the box.",
    )


class BoxesBody(BaseModel):
    boxes: list[BoxIn] = Field(
        max_length=pdf_forms.MAX_FIELDS,
        description="Every box of the new version (they replace the placed ones; `[]` "
        "removes them). A form's own fields stay.",
    )


class PageOut(BaseModel):
    page: int = Field(description="1 for the first.")
    left: float = Field(description="The crop box's left edge, points (0 on almost every page).")
    bottom: float = Field(description="The crop box's bottom edge, points (0 on almost every page).")
    width: float = Field(description="Points.")
    height: float = Field(description="Points.")
    rotation: int = Field(description="Degrees a viewer turns the page; boxes cannot be placed on a turned page.")


class FieldOut(BaseModel):
    variable: str = Field(description="The form field's name: the column whose value fills it.")
    page: int = Field(description="1 for the first.")
    x: float
    y: float
    width: float
    height: float


class BoxesOut(BaseModel):
    version: int = Field(description="The newest version, which these boxes belong to.")
    pages: list[PageOut]
    fields: list[FieldOut] = Field(description="The form's own fields: they stay where the file has them.")
    boxes: list[BoxIn] = Field(description="The placed boxes, as `PUT` takes them: send them back changed.")


def form_fields_out(version: TemplateVersion) -> list[FormFieldOut]:
    return [
        FormFieldOut(
            name=f.name,
            use=use.use if use else "",
            party=use.party if use else RECIPIENT_ROLE,
            type=use.type if use else "text",
            column=use.column if use else "",
            field=use.field if use else "",
            page=f.page + 1,
            x=round(f.x, 2),
            y=round(f.y, 2),
            width=round(f.w, 2),
            height=round(f.h, 2),
        )
        for f, use in own_fields(version)
    ]


def template_out(template: DocumentTemplate, version: TemplateVersion | None) -> TemplateOut:
    columns = needed_columns(version) if version else {}
    path = render_path(version, enabled=current_app.config["RENDER_TOGETHER"]) if version else None
    return TemplateOut(
        id=template.id,
        name=template.name,
        version=template.latest_version,
        team_id=template.team_id,
        kind=version.kind if version else None,
        variables=list(version.variables) if version else [],
        roles=template_roles(version) if version else [],
        required=[v for v, where in columns.items() if where != OPTIONAL],
        optional=[v for v, where in columns.items() if where == OPTIONAL],
        render_together=path.together if path else None,
        render_alone_reason=str(path.reason) if path and path.reason else None,
        form_fields=form_fields_out(version) if version else [],
        sample=template_sample(template, version) if version else {},
        created_at=template.created_at,
    )


class FieldSettingsIn(BaseModel):
    """One field the signer fills, marked `{{ field_<name> }}` in the document (a PDF's form field or box
    `field_<name>`). A field is never a column the recipients file must have: a column `field_<name>` prefills it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: Text = Field(min_length=1, max_length=40, description="`iban` for the mark `{{ field_iban }}`.")
    type: Text = Field("text", description=f"One of {', '.join(f'`{t}`' for t in FIELD_TYPES)}.")
    label: Text = Field(
        "", max_length=MAX_LABEL_CHARS, description="What the signer reads at the field; empty: its name."
    )
    required: bool = Field(True, description="The signer must fill it to sign.")
    pattern: Text | None = Field(
        None,
        max_length=MAX_PATTERN_CHARS,
        description="`text` only: a regular expression (Python's) the whole value must match.",
    )
    minimum: float | Text | None = Field(
        None, description="`number`: the lowest number; `date`: the earliest date, YYYY-MM-DD. Null: open."
    )
    maximum: float | Text | None = Field(
        None, description="`number`: the highest number; `date`: the latest date, YYYY-MM-DD. Null: open."
    )
    options: list[Text] = Field(
        [], max_length=MAX_OPTIONS, description="`choice` only (and needed): what to choose from."
    )
    read_only: bool = Field(
        False, description="When the file prefills it (a column `field_<name>`), the signer may not change it."
    )
    role: Text = Field(
        "recipient", description="Who fills it: `recipient` (the row's own) or another role of the template's `roles`."
    )
    condition: ConditionIn | None = Field(
        None,
        description="Shown and required only when this holds; null: always. A field's condition looks at another "
        "field of its own party, or of a party who signs in an earlier step (not at itself, nor in a circle); a "
        "column's at the row. A field that does not apply is not asked for, stores nothing and prints nothing.",
    )


class FieldSettingsOut(FieldSettingsIn):
    column: str = Field(description="The column of the recipients file that prefills it: `field_<name>`.")


class FieldsBody(BaseModel):
    fields: list[FieldSettingsIn] = Field(
        max_length=MAX_FIELDS,
        description="Settings for the template's fields; a field left out gets the defaults (`text`, required, the "
        "recipient's).",
    )


class FieldsOut(BaseModel):
    version: int = Field(description="The newest version, which these fields belong to.")
    roles: list[str] = Field(description="Who signs, as `role` may name them.")
    fields: list[FieldSettingsOut] = Field(description="The template's fields in the order the document has them.")


def fields_out(version: TemplateVersion) -> FieldsOut:
    return FieldsOut(
        version=version.version,
        roles=template_roles(version),
        fields=[
            FieldSettingsOut(**{"condition": None, **f.to_json()}, column=f.column) for f in template_fields(version)
        ],
    )


def parties_out(version: TemplateVersion, *, language: str) -> PartiesOut:
    found = check_template(version, language=language)
    return PartiesOut(
        version=version.version,
        parties=[PartyIn(**p.to_json()) for p in template_parties(version)],
        routing=template_routing(version),
        check=CheckOut(errors=[str(e) for e in found.errors], warnings=[str(w) for w in found.warnings]),
    )
