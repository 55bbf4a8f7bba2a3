"""A party signs through sign() with the signing page's form filled in, as a signer sends it."""

from __future__ import annotations

from flask import current_app

from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Party, utcnow
from bulksign.signing.field_entry import FilledForm, Upload
from bulksign.signing.recipient_actions import sign
from tests.support.signatures import png


def filled_form(typed: dict[str, str], files: dict[str, Upload] | None = None) -> FilledForm:
    """The signing page's form as a signer sends it: ``typed`` as they type it in the batch's language (a date as
    ISO, as ``<input type=date>`` sends it; a ticked checkbox ``TICKED``, an unticked one nothing), ``files`` the
    attachments they choose; within the app's size limit, stored where its documents are."""
    return FilledForm(
        typed=typed,
        files=files or {},
        attachment_max_bytes=current_app.config["ATTACHMENT_MAX_MB"] * 1024 * 1024,
        storage=get_storage(),
    )


def sign_filled(
    request_id: int,
    name: str,
    party: Party | None = None,
    *,
    typed: dict[str, str] | None = None,
    files: dict[str, Upload] | None = None,
) -> None:
    """Sign with the form's values (``filled_form``): sign() checks them and saves one row per field of the
    party's."""
    outcome = sign(
        db.session,
        request_id=request_id,
        now=utcnow(),
        signer_name=name,
        signature_png=png(),
        consent=True,
        ip="203.0.113.5",
        user_agent="Mozilla/5.0",
        party=party,
        filled=filled_form(typed or {}, files),
    )
    assert outcome.status == "signed", outcome
