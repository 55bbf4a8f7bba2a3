"""Form and request fields that several views read: parsed here once, a 400/UploadError with the reason otherwise."""

from __future__ import annotations

from flask import abort, current_app, request
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.batches.resend import MAX_EXTEND_DAYS
from bulksign.core.extensions import db
from bulksign.doc_templates import versions as dt
from bulksign.models import TemplateVersion
from bulksign.people import access
from bulksign.recipients.rows import UploadError


def client_ip() -> str:
    """The visitor's address; behind ``PROXY_HOPS`` trusted proxies, the one they saw (X-Forwarded-For).

    Without this, every recipient behind a load balancer would share one rate-limit budget and
    the audit trail would record the proxy's address.
    """
    hops = current_app.config.get("PROXY_HOPS", 0)
    if hops:
        forwarded = [part.strip() for part in request.headers.get("X-Forwarded-For", "").split(",") if part.strip()]
        if len(forwarded) >= hops:
            return forwarded[-hops][:64]
    return request.remote_addr or ""


def uploaded_file() -> tuple[bytes, str]:
    """The bytes and name of the multipart ``file`` field; UploadError when none was chosen."""
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        raise UploadError(_("Choose a recipients file (.csv or .xlsx) to upload."))
    return upload.read(), upload.filename


def template_version(raw_id) -> TemplateVersion:
    """The newest version of the chosen template, if the user may use it; UploadError when there is none."""
    try:
        template_id = int(raw_id)
    except (TypeError, ValueError):
        raise UploadError(_("Choose a template.")) from None
    try:
        access.template_for_use(db.session, template_id=template_id, user=current_user)
    except access.Refused:
        version = None
    else:
        version = dt.get_version(db.session, template_id=template_id)
    if version is None:
        raise UploadError(_("There is no template with id %(id)s.", id=template_id), 404)
    return version


def extend_days_field() -> int | None:
    """The optional ``extend_days`` form field (1–365); a 400 with the reason otherwise."""
    raw = (request.form.get("extend_days") or "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_EXTEND_DAYS:
        abort(400, description=_("Extra days must be a whole number from 1 to %(n)s.", n=MAX_EXTEND_DAYS))
    return int(raw)
