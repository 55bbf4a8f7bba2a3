"""A template's sample row: a value for each column its document and mails use, edited on the template page, which
the parties' previews are rendered with; and the template check's word on a column the sample leaves empty."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from bulksign.core.messages import N_
from bulksign.doc_templates.columns import DATE, NUMBER, needed_columns, value_kinds
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.variables import sample_row
from bulksign.documents.storage import StorageError
from bulksign.models import DocumentTemplate, TemplateVersion

#: Columns and characters a sample row may hold: what a page's form sends, bounded.
MAX_SAMPLE_COLUMNS = 200
MAX_SAMPLE_CHARS = 500
#: A made-up value a ``|date`` or ``|money`` filter takes, by what the filter needs (``columns.value_kinds``).
_TYPED_SAMPLES = {DATE: "2026-01-31", NUMBER: "1000"}


def clean_sample(given: Mapping[str, object]) -> dict[str, str]:
    """A sample row as a page sends it, bounded: text values, the first ``MAX_SAMPLE_COLUMNS`` columns."""
    return {
        str(k)[:80]: str(v)[:MAX_SAMPLE_CHARS] for k, v in list(given.items())[:MAX_SAMPLE_COLUMNS] if str(k).strip()
    }


def sample_columns(version: TemplateVersion) -> list[str]:
    """The columns a sample row gives a value: every column the version's document and mails use, or a field's
    condition looks at; not a field's prefill column (the field is the signer's to fill)."""
    try:
        columns = list(needed_columns(version))
    except (TemplateError, StorageError):  # a file that cannot be read now: its saved variables
        columns = list(version.variables or ())
    prefills = {f.column for f in template_fields(version)}
    return [c for c in columns if c not in prefills]


def default_sample(version: TemplateVersion) -> dict[str, str]:
    """A sample made up from the columns' names (``[column]``), a name and addresses that read as such, and a
    date or number where a filter needs one."""
    columns = sample_columns(version)
    try:
        kinds = value_kinds(version)
    except StorageError:
        kinds = {}
    made = sample_row(columns, {})
    return {c: _TYPED_SAMPLES.get(kinds.get(c, ""), made[c]) for c in columns}


def template_sample(template: DocumentTemplate, version: TemplateVersion) -> dict[str, str]:
    """The sample row staff saved on ``template``, else one made up for ``version`` (``default_sample``)."""
    if template.sample is None:
        return default_sample(version)
    return {str(k): str(v) for k, v in template.sample.items()}


def save_sample(session: Session, *, template: DocumentTemplate, sample: Mapping[str, object]) -> dict[str, str]:
    """Keep ``sample`` (column → value, bounded as a page sends it) as ``template``'s sample row; the row kept. The
    caller commits. A sample is not a version: batches and their documents never read it."""
    template.sample = clean_sample(sample)
    session.flush()
    return dict(template.sample)


def sample_gaps(version: TemplateVersion, sample: Mapping[str, str]) -> list[N_]:
    """The template check's warnings on ``sample``: each column ``version`` uses that it leaves empty or lacks."""
    return [
        N_(
            "The sample row has no value for the column “%(column)s”, which the template uses: the preview shows it "
            "empty. Fill it in under “Sample row”.",
            column=column,
        )
        for column in sample_columns(version)
        if not str(sample.get(column) or "").strip()
    ]
