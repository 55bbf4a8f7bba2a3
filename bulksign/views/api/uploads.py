"""JSON API for recipient files: check one against a template, or create a batch from it (multipart uploads)."""

from __future__ import annotations

import json
from datetime import datetime

from flask import Blueprint, current_app, g, request
from pydantic import BaseModel, ConfigDict, Field

from bulksign.batches.batch_settings import (
    BatchError,
    BatchSettingsForm,
    PartySettings,
    ReachFields,
    checked_settings,
    party_settings_from_form,
)
from bulksign.batches.creation import create_batch
from bulksign.core.extensions import db
from bulksign.core.schemas import ABSENT, Text, no_null_defaults
from bulksign.doc_templates.columns import needed_columns, value_kinds
from bulksign.models import utcnow
from bulksign.models.batches import Reach
from bulksign.models.status import BATCH_STATE_NAMES, BatchStatus
from bulksign.recipients import suppressions
from bulksign.recipients.column_mapping import ColumnMapping, parse_mapping
from bulksign.recipients.row_checks import RowError
from bulksign.recipients.rows import UploadError
from bulksign.recipients.validation import ValidationReport, validate_recipients
from bulksign.views._forms import template_version, uploaded_file
from bulksign.views.api.common import ApiError, Link, RecordId, answer, operation, parse_form

bp = Blueprint("api_uploads", __name__, url_prefix="/api/v1")


class RecipientsForm(ReachFields):
    # Unknown fields are refused, not ignored: a misspelt setting would otherwise silently take its default.
    # Optional multipart fields (``parties``) are left out, never null.
    model_config = ConfigDict(extra="forbid", json_schema_extra=no_null_defaults)
    template_id: RecordId = Field(description="The template whose placeholders the file's columns fill.")
    file: bytes = Field(
        description="The recipients: .csv (any delimiter, UTF-8 or legacy encodings) or .xlsx, "
        "a header row with `email` and the template's variables."
    )
    parties: Text = Field(
        ABSENT,
        max_length=20_000,
        description="A template several parties sign (its `roles`): who signs each other role for the whole batch, "
        'JSON `{"employer": {"email": "...", "name": "...", "phone": "..."}}`. A role the file names per row in '
        "`<role>_email` (`<role>_name`, `<role>_phone`) columns needs none.",
    )
    columns: Text = Field(
        ABSENT,
        max_length=20_000,
        description="Which of the file's columns fill the template's when their names differ: JSON "
        '`{"name": "ФИО", "email": "Почта"}`; a list joins several with a space (`{"name": ["Фамилия", "Имя", '
        '"Отчество"]}`). A file without a column the template needs is answered with `unmatched_columns`, each '
        "with the file's likeliest column as `suggestion`.",
    )


class BatchForm(RecipientsForm, BatchSettingsForm):
    # Multipart fields are left out, never null: optional ones default to None without allowing (or showing) null.
    model_config = ConfigDict(json_schema_extra=no_null_defaults)
    routing: Text = Field(
        ABSENT,
        max_length=5_000,
        description="The order parties sign in: JSON list of steps, each a list of roles that sign at once, e.g. "
        '`[["recipient"], ["employer"]]` (the default: the recipient first, then each role in document order) or '
        '`[["recipient", "employer"]]`, or `[["employer"], ["recipient"]]` for the recipient after the employer; '
        "each step starts when every party of the one before has signed.",
    )
    skip_invalid: bool = Field(ABSENT, description="Create the batch from the valid rows when some have errors.")


class RowErrorOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=no_null_defaults)  # absent, never null
    row: int
    column: str | None
    message: str
    suggestion: str = Field(ABSENT, description="The likely meant address, for a misspelt domain (else absent).")


class SuppressedOut(BaseModel):
    row: int
    email: str
    source: str
    reason: str
    since: datetime


class UnmatchedOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=no_null_defaults)  # absent, never null
    column: str
    suggestion: list[str] = Field(ABSENT, description="The file's column(s) likely meant (absent: no guess).")


class ValidationReportOut(BaseModel):
    total_rows: int
    valid_rows: int
    invalid_rows: int
    error_count: int
    errors: list[RowErrorOut] = Field(description="The first row errors (the count is in `error_count`).")
    warnings: list[str]
    columns: list[str]
    missing_columns: list[str] = Field(description="Variables of the template the file has no column for.")
    file_format: str = Field(description="`csv` or `xlsx`.")
    encoding: str | None
    delimiter: str | None
    unmatched_columns: list[UnmatchedOut] = Field(
        description="Columns the template needs that the file has under no name the check knows (nor `columns` "
        "maps), each with the file's likeliest column(s), to send as `columns`."
    )
    mapping: dict[str, list[str]] | None = Field(description="The `columns` the check used.")
    suppressed_count: int = Field(description="Valid rows whose address is on the suppression list (not mailed).")
    phone_rows: int = Field(description="Valid rows with a phone (checked only when the `channel` texts).")
    text_only_rows: int = Field(description="Valid rows with a phone and no address: reached by text alone.")
    suppressed: list[SuppressedOut] = Field(description="The first of them, with the list's reason.")


class BatchCreated(BaseModel):
    id: int
    status: str = Field(
        description="`sending` (as `GET /batches/{batch_id}` names it), or `closed` when no row can be mailed."
    )
    total_count: int
    skipped_rows: int = Field(description="Rows left out for their errors (with `skip_invalid`), kept with the batch.")
    notify_email: str | None = Field(description="Who gets the batch's notices; null: its owner.")
    one_time_code: bool
    channel: Reach
    text_cap: int | None = Field(description="At most this many text messages; null for a batch that only mails.")


def _upload_error(exc: UploadError) -> ApiError:
    # An unreadable file is well-formed multipart with content that cannot be processed: 422, not 400.
    status = 422 if exc.status == 400 else exc.status
    return ApiError(exc.message, status, code="file_refused" if status in (415, 422) else None)


@bp.post("/batches/validate")
@operation(
    "Check a recipients file",
    tag="Batches",
    form=RecipientsForm,
    responses={200: ValidationReportOut},
    errors=(400, 404, 413, 415, 422),
)
def validate():
    """Reads the file as batch creation would and reports every row error; creates nothing."""
    form = parse_form(RecipientsForm)
    try:
        version = template_version(form.template_id)
        data, filename = uploaded_file()
        signers = party_settings_from_form(
            request.form, version=version, phone_region=current_app.config["PHONE_REGION"]
        )
        report = validate_recipients(
            data,
            filename=filename,
            variables=needed_columns(version),
            kinds=value_kinds(version),
            suppressed=suppressions.lookup(db.session),
            mapping=_mapping(form.columns),
            **signers.file_check,
        )
    except UploadError as exc:
        raise _upload_error(exc) from None
    except BatchError as exc:
        raise ApiError(exc.message, 422, code="settings_invalid", details={"field": exc.field}) from None
    return answer(ValidationReportOut(**report.as_dict()))


@bp.post("/batches")
@operation(
    "Create a batch from a recipients file",
    tag="Batches",
    form=BatchForm,
    responses={201: BatchCreated},
    errors=(400, 403, 404, 413, 415, 422),
    idempotent=True,
    links={
        201: {
            "GetBatch": Link("api_dashboard.get_batch", {"batch_id": "$response.body#/id"}),
            "ListRequests": Link("api_dashboard.list_requests", {"batch_id": "$response.body#/id"}),
            "ExportCsv": Link("api_dashboard.export_csv", {"batch_id": "$response.body#/id"}),
            "Remind": Link("api_reminders.remind", {"batch_id": "$response.body#/id"}),
            "Cancel": Link("api_batch_actions.cancel", {"batch_id": "$response.body#/id"}),
        }
    },
)
def create():
    """One request per valid row is rendered and sent by the workers; follow it with `GET /batches/{batch_id}`.

    A file with row errors is refused (422, with the report in `details`) unless `skip_invalid` is true.
    """
    form = parse_form(BatchForm)
    try:
        version = template_version(form.template_id)
        data, filename = uploaded_file()
        settings = checked_settings(form, default_name=f"{version.template.name} ({utcnow():%Y-%m-%d})")
        signers = party_settings_from_form(
            request.form, version=version, phone_region=current_app.config["PHONE_REGION"]
        )
        report = validate_recipients(
            data,
            filename=filename,
            variables=needed_columns(version),
            kinds=value_kinds(version),
            language=settings.language,
            keep_rows=True,
            mapping=_mapping(form.columns),
            **signers.file_check,
        )
        if report.invalid_rows and not form.skip_invalid or not report.valid_rows:
            reason = (
                _unmatched(report)
                if report.unmatched
                else "No row of the file can be used."
                if not report.valid_rows
                else f"{report.invalid_rows} of {report.total_rows} rows have errors. Fix them, or send "
                "skip_invalid=true to create the batch with the valid rows only."
            )
            raise ApiError(reason, 422, code="rows_invalid", details=report.as_dict())
        result = create_batch(
            db.session,
            user=g.api_user,
            template_version=version,
            rows=report.recipients,
            skipped=_every_error(
                report,
                data=data,
                filename=filename,
                version=version,
                signers=signers,
                mapping=report.mapping,
                language=settings.language,
            ),
            now=utcnow(),
            party_settings=signers,
            settings=settings,
        )
    except UploadError as exc:
        raise _upload_error(exc) from None
    except BatchError as exc:
        raise ApiError(exc.message, 422, code="settings_invalid", details={"field": exc.field}) from None
    batch = result.batch
    return answer(
        BatchCreated(
            id=batch.id,
            status=BATCH_STATE_NAMES[BatchStatus(batch.status)],
            total_count=batch.total_count,
            skipped_rows=batch.skipped_count,
            notify_email=batch.notify_email,
            one_time_code=batch.one_time_code,
            channel=Reach(batch.channel),
            text_cap=batch.text_cap if batch.channel != Reach.MAIL else None,
        ),
        201,
    )


def _mapping(raw: str | None) -> ColumnMapping | None:
    return parse_mapping(raw) if raw else None


def _unmatched(report: ValidationReport) -> str:
    """The refusal of a file without columns the template needs: each of them, and the file's likeliest one."""
    named = [
        f'"{c.column}" (the file\'s {" + ".join(c.headers)}?)' if c.headers else f'"{c.column}"'
        for c in report.unmatched
    ]
    example = {
        c.column: c.headers[0] if len(c.headers) == 1 else list(c.headers) for c in report.unmatched if c.headers
    }
    hint = f" Name the file's columns in `columns`, e.g. {json.dumps(example, ensure_ascii=False)}." if example else ""
    return f"The file has no column for {', '.join(named)}.{hint}"


def _every_error(
    report: ValidationReport,
    *,
    data: bytes,
    filename: str,
    version,
    signers: PartySettings,
    mapping: ColumnMapping | None,
    language: str,
) -> tuple[RowError, ...]:
    """All the file's row errors, for the rows the batch leaves out: the report keeps the first hundred only."""
    if not report.errors_truncated:
        return report.errors
    return validate_recipients(
        data,
        filename=filename,
        variables=needed_columns(version),
        kinds=value_kinds(version),
        language=language,
        max_errors=None,
        mapping=mapping,
        **signers.file_check,
    ).errors
