"""Staff pages for a new batch: pick a template, upload recipients, see the errors, create the batch.

The uploaded file is stored under an unguessable id between "check" and "create", and read again
on create: nothing the browser sends back about the rows is trusted.
"""

from __future__ import annotations

import secrets
from typing import Any

from flask import Blueprint, Response, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import get_locale, ngettext
from flask_login import current_user

from bulksign.batches.batch_settings import BatchError, PartySettings, party_settings_from_form, settings_from_form
from bulksign.batches.creation import create_batch
from bulksign.batches.texting import REACH_LABELS
from bulksign.core.config import LANGUAGES
from bulksign.core.errors import Message
from bulksign.core.extensions import db
from bulksign.core.localtime import canonical_zone, zone_groups
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates.columns import OPTIONAL, needed_columns, value_kinds
from bulksign.doc_templates.roles import template_roles
from bulksign.doc_templates.template_parties import party_labels, template_parties, template_routing
from bulksign.documents.storage import get_storage
from bulksign.models import RECIPIENT_ROLE, TemplateVersion, utcnow
from bulksign.models.status import BatchStatus
from bulksign.people import access
from bulksign.recipients import column_mapping, suppressions
from bulksign.recipients.column_mapping import MAX_JOINED, ColumnMapping, parse_mapping
from bulksign.recipients.rows import MAX_COLUMNS, UploadError
from bulksign.recipients.uploads import StoredUpload, confirm_mapping, load_upload, store_upload
from bulksign.recipients.validation import ValidationReport, error_report_csv, typo_domains, validate_recipients
from bulksign.views._forms import template_version, uploaded_file

bp = Blueprint("uploads", __name__, url_prefix="/batches")


def domain_choices() -> dict[str, str]:
    """Staff's answers to "did you mean gmail.com?": ``domain_choice`` fields ``written=chosen`` (at most 50)."""
    choices = {}
    for raw in request.form.getlist("domain_choice")[:50]:
        written, _, chosen = raw.strip().lower().partition("=")
        if written and chosen:
            choices[written] = chosen
    return choices


def _preview_context(
    report: ValidationReport | None, choices: dict[str, str], mapping_error: Message | None = None
) -> dict:
    """What the check's partial needs besides the report: the open typo questions and the answers so far, and why
    the columns as matched last did not fit the file."""
    return {
        "mapping_error": mapping_error,
        "typos": typo_domains(report) if report else {},
        "choices": choices,
        "suppression_why": suppressions.WHY,
        # The parties, routing and channel given with the file, carried to the batch's creation and to a re-check.
        "party_fields": {
            k: v for k, v in request.form.items() if k.startswith("party_") or k in ("routing", "channel")
        },
        "texts_allowed": _texts_allowed(report),
        "channel_labels": {reach.value: str(label) for reach, label in REACH_LABELS.items()},
    }


def _texts_allowed(report: ValidationReport | None) -> int:
    """How many texts the batch may send with the file's rows and the default settings (the page says it)."""
    if report is None:
        return 0
    try:
        settings = settings_from_form(request.form, default_name="")
    except BatchError:
        return 0
    return settings.texts_allowed(phone_rows=report.phone_rows)


def _page(
    *,
    status: int = 200,
    report: ValidationReport | None = None,
    upload: StoredUpload | None = None,
    error: Message | None = None,
    template_id: int | None = None,
    field_errors: dict | None = None,
    choices: dict[str, str] | None = None,
    mapping_error: Message | None = None,
):
    templates = dt.list_templates(db.session, user=current_user)
    template_id = template_id or request.values.get("template_id", type=int)
    chosen = next((t for t in templates if t.id == template_id), templates[0] if templates else None)
    language = get_locale().language
    return render_template(
        "uploads/new.html",
        templates=templates,
        report=report,
        upload=upload,
        error=error,
        template_id=template_id,
        form=request.form,
        form_token=request.form.get("form_token") or secrets.token_hex(16),
        field_errors=field_errors or {},
        zone_groups=zone_groups(locale=language),
        # Recipients of a new batch read their times in the organisation's zone and the staff member's language,
        # unless the form says otherwise.
        default_zone=canonical_zone(current_app.config["ORG_TIMEZONE"]),
        default_language=language,
        columns=_columns(chosen.id) if chosen else None,
        **_preview_context(report, choices or {}, mapping_error),
        managers=access.managers_of(db.session, team_ids=access.team_ids_of(db.session, user=current_user)),
    ), status


def _columns(template_id: int) -> dict[str, Any] | None:
    """The columns the template's newest version needs on every row and those it may use, for the file's hint; its
    parties (labels in the page's language, the template's fixed people) and its signing order."""
    try:
        version = template_version(template_id)
    except UploadError:
        return None
    columns = needed_columns(version)
    return {
        "required": ["email", *(v for v, where in columns.items() if where != OPTIONAL and v != "email")],
        "optional": [v for v, where in columns.items() if where == OPTIONAL],
        # The other parties who sign it: a field each for one person for the whole batch, or the file's columns.
        "roles": [r for r in template_roles(version) if r != RECIPIENT_ROLE],
        "parties": template_parties(version),
        "names": party_labels(version, language=str(get_locale())),
        "routing": _shown_routing(version),
    }


def _shown_routing(version: TemplateVersion) -> list[list[str]]:
    """The order the page shows: the one staff moved to (sent back with the form) when it names the template's
    parties, else the template's; the batch's creation checks it again."""
    try:
        given = current_app.json.loads(request.values.get("routing") or "null")
    except ValueError:
        given = None
    keys = set(template_roles(version))
    steps = given if isinstance(given, list) and all(isinstance(s, list) and s for s in given) else []
    named = [k for s in steps for k in s]
    if sorted(map(str, named)) == sorted(keys):
        return [[str(k) for k in s] for s in steps]
    return template_routing(version)


@bp.get("/new")
def new():
    access.require_creator(current_user)
    return _page()


@bp.get("/new/columns")
def columns():
    """The file's hint for the chosen template (the template picker asks for it when it changes)."""
    access.require_creator(current_user)
    return render_template("uploads/_columns.html", columns=_columns(request.args.get("template_id", type=int) or 0))


@bp.post("/new/validate")
def validate():
    """Store the file and check it; an HTMX request gets only the preview partial."""
    access.require_creator(current_user)
    try:
        version = template_version(request.form.get("template_id"))
        data, filename = uploaded_file()
        signers = _signers(version)
        report = validate_recipients(
            data,
            filename=filename,
            variables=needed_columns(version),
            kinds=value_kinds(version),
            language=preview_language(),
            suppressed=suppressions.lookup(db.session),
            remembered=column_mapping.remembered(
                db.session, template_id=version.template_id, team_id=version.template.team_id
            ),
            **signers.file_check,
        )
        upload = store_upload(
            db.session,
            get_storage(),
            data=data,
            filename=filename,
            user_id=current_user.id,
            template_id=version.template_id,
            now=utcnow(),
            mapping=report.mapping,
        )
        db.session.commit()
    except UploadError as exc:
        return _check_refused(exc)
    return _checked(report, upload=upload, template_id=version.template_id, choices={})


@bp.post("/new/recheck")
def recheck():
    """Check the stored file again with staff's answers about misspelt domains (use the suggestion, or keep), or in
    the recipients' language chosen since (a batch that texts reads national phone numbers in its region)."""
    access.require_creator(current_user)
    choices = domain_choices()
    try:
        upload, version, report = check_stored(
            request.form.get("upload_id", ""), domain_choices=choices, suppressed=suppressions.lookup(db.session)
        )
    except UploadError as exc:
        return _check_refused(exc)
    return _checked(report, upload=upload, template_id=version.template_id, choices=choices)


@bp.post("/new/match")
def match_columns():
    """Check the stored file again with the columns staff matched to the template's; they are kept for the batch
    and offered for the template's next file. A match that does not fit the file is said above the form again."""
    access.require_creator(current_user)
    choices = domain_choices()
    upload_id = request.form.get("upload_id", "")
    try:
        mapping = parse_mapping(_matched_columns())
        upload, version, report = check_stored(
            upload_id, mapping=mapping, domain_choices=choices, suppressed=suppressions.lookup(db.session)
        )
        upload = confirm_mapping(
            db.session,
            upload=upload,
            mapping=mapping,
            team_id=version.template.team_id,
            user_id=current_user.id,
            now=utcnow(),
        )
        db.session.commit()
    except UploadError as exc:
        if exc.field != "columns":
            return _check_refused(exc)
        try:
            upload, version, report = check_stored(
                upload_id, domain_choices=choices, suppressed=suppressions.lookup(db.session)
            )
        except UploadError as again:
            return _check_refused(again)
        return _checked(
            report, upload=upload, template_id=version.template_id, choices=choices, mapping_error=exc.message
        )
    return _checked(report, upload=upload, template_id=version.template_id, choices=choices)


def _matched_columns() -> dict[str, list[str]]:
    """The mapping form's ``column.<template column>`` fields: the file's column(s) chosen for each."""
    fields = [k for k in request.form if k.startswith("column.")][: MAX_COLUMNS + 1]
    return {k.removeprefix("column."): request.form.getlist(k)[: MAX_JOINED + 1] for k in fields}


def check_stored(
    upload_id: str, *, mapping: ColumnMapping | None = None, **options
) -> tuple[StoredUpload, TemplateVersion, ValidationReport]:
    """The user's stored file, its template's version and the file checked again against it (``options``: those of
    ``validate_recipients``), with ``mapping`` or else the columns matched for it. Nothing the browser sent back
    about the rows is trusted: they are read again. UploadError for a file gone, another's, or one that cannot
    be read."""
    upload = load_upload(db.session, get_storage(), upload_id=upload_id, user_id=current_user.id)
    version = template_version(upload.template_id)
    signers = _signers(version)
    report = validate_recipients(
        upload.data,
        filename=upload.filename,
        variables=needed_columns(version),
        kinds=value_kinds(version),
        language=preview_language(),
        mapping=mapping or upload.mapping,
        **signers.file_check,
        **options,
    )
    return upload, version, report


def preview_language() -> str:
    """The recipients' language as the form chose it, else the staff member's: an .xlsx's dates and numbers read
    in it as their cells show them."""
    chosen = request.values.get("language")
    return chosen if chosen in LANGUAGES else get_locale().language


def _signers(version: TemplateVersion) -> PartySettings:
    """The template's parties as the form gives them (a field per other role, the routing); UploadError saying
    what is wrong with them, so the file check answers with it."""
    try:
        # The file is checked before the language is chosen: national numbers are read in the staff's until then.
        form = {"language": get_locale().language, **request.values.to_dict()}
        return party_settings_from_form(form, version=version, phone_region=current_app.config["PHONE_REGION"])
    except BatchError as exc:
        raise UploadError(exc.message, 422) from None


def _check_refused(exc: UploadError):
    """A file that could not be checked: the preview partial (HTMX) or the whole page, with the reason."""
    if request.headers.get("HX-Request"):
        return render_template("uploads/_preview.html", error=exc.message, report=None, oob=True), exc.status
    return _page(status=exc.status, error=exc.message)


def _checked(
    report: ValidationReport,
    *,
    upload: StoredUpload,
    template_id: int,
    choices: dict,
    mapping_error: Message | None = None,
):
    """The file check's report: the preview partial (HTMX) or the whole page with the batch settings."""
    if request.headers.get("HX-Request"):
        return render_template(
            "uploads/_preview.html",
            report=report,
            upload=upload,
            error=None,
            oob=True,
            **_preview_context(report, choices, mapping_error),
        )
    return _page(report=report, upload=upload, template_id=template_id, choices=choices, mapping_error=mapping_error)


@bp.post("/new")
def create():
    """Create the batch from the stored file's valid rows; a repeated form token returns the same batch."""
    try:
        upload, version, report = check_stored(
            request.form.get("upload_id", ""),
            keep_rows=True,
            domain_choices=domain_choices(),
            # Every error, not the page's first hundred: the rows left out are kept with the batch.
            max_errors=None,
        )
        settings = settings_from_form(request.form, default_name=f"{version.template.name} ({utcnow():%Y-%m-%d})")
        result = create_batch(
            db.session,
            user=current_user,
            template_version=version,
            rows=report.recipients,
            skipped=report.errors,
            now=utcnow(),
            idempotency_key=request.form.get("form_token") or None,
            party_settings=_signers(version),
            upload_id=upload.upload_id,
            settings=settings,
        )
    except UploadError as exc:
        return _page(status=exc.status, error=exc.message)
    except BatchError as exc:
        db.session.rollback()
        return _page(status=422, error=exc.message, field_errors={exc.field: exc.message} if exc.field else {})
    if result.created and result.batch.status == BatchStatus.AWAITING_APPROVAL:
        flash(
            ngettext(
                "Batch created with %(num)s recipient. Nothing is sent until it is approved: its team's managers "
                "were asked by email.",
                "Batch created with %(num)s recipients. Nothing is sent until it is approved: its team's managers "
                "were asked by email.",
                result.total_count,
            ),
            "success",
        )
    elif result.created:
        flash(
            ngettext(
                "Batch created with %(num)s recipient. Its document is being prepared.",
                "Batch created with %(num)s recipients. Documents are being prepared.",
                result.total_count,
            ),
            "success",
        )
        if result.suppressed:
            flash(
                ngettext(
                    "%(num)s address is on the suppression list and was not mailed: see the failed requests.",
                    "%(num)s addresses are on the suppression list and were not mailed: see the failed requests.",
                    result.suppressed,
                ),
                "warning",
            )
        if result.batch.skipped_count:
            flash(
                ngettext(
                    "%(num)s row with errors was left out: the batch page keeps it, with the reason, to download.",
                    "%(num)s rows with errors were left out: the batch page keeps them, with the reasons, to download.",
                    result.batch.skipped_count,
                ),
                "warning",
            )
    return redirect(url_for("batches.detail", batch_id=result.batch.id), 303)


@bp.get("/uploads/<upload_id>/errors.csv")
def error_report(upload_id: str):
    """Every error of the stored file, as a spreadsheet-safe CSV."""
    try:
        upload, _, report = check_stored(upload_id, max_errors=None)
    except UploadError as exc:
        abort(exc.status, exc.message)
    return Response(
        "\ufeff" + error_report_csv(report),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="errors-{upload.upload_id[:8]}.csv"'},
    )
