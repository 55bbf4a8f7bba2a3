"""``/verify``: anyone may check whether a PDF (or a sha256) was issued here and whether its seal holds."""

from __future__ import annotations

from flask import Blueprint, current_app, render_template, request
from flask_babel import gettext as _

from bulksign.core.extensions import db
from bulksign.documents.seal_keys import SealError, seal_key
from bulksign.documents.sealing import timestamping
from bulksign.documents.verification import InvalidFingerprint, verify_file, verify_fingerprint
from bulksign.people.auth import public
from bulksign.views.recipient.signing import recipient_limit

bp = Blueprint("verify", __name__)

#: Signed documents are a few hundred KB; a bigger upload is not one of ours.
MAX_VERIFY_BYTES = 20 * 1024 * 1024


@bp.route("/verify", methods=["GET", "POST"])
@public
@recipient_limit
def verify():
    if request.method == "GET":
        return render_template("signing/verify.html", verdict=None, error=None)
    upload = request.files.get("file")
    fingerprint = request.form.get("sha256", "").strip()
    try:
        if upload is not None and upload.filename:
            data = upload.stream.read(MAX_VERIFY_BYTES + 1)
            if len(data) > MAX_VERIFY_BYTES:
                return _error(_("The file is too large to be a document issued here."), 413)
            tsa = timestamping(current_app.config)
            verdict = verify_file(
                db.session, data=data, key=seal_key(current_app.config), tsa_roots=tsa.trust_roots if tsa else ()
            )
        elif fingerprint:
            verdict = verify_fingerprint(db.session, sha256=fingerprint)
        else:
            return _error(_("Choose a PDF file, or paste its sha256 fingerprint."), 400)
    except InvalidFingerprint as exc:
        return _error(str(exc.message), exc.status)
    except SealError:
        return _error(_("Verification is not available right now. Please try again later."), 503)
    return render_template(
        "signing/verify.html", verdict=verdict, by_file=upload is not None and bool(upload.filename), error=None
    )


def _error(message: str, status: int):
    return render_template("signing/verify.html", verdict=None, error=message), status
