"""The batch page's evidence package: build it (a job), follow it, download it (read from storage in parts)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.batches.evidence import EVIDENCE, start_evidence
from bulksign.batches.exports import latest_export
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import utcnow
from bulksign.views._downloads import streamed_attachment
from bulksign.work.queues import SIGNED_ZIP

bp = Blueprint("evidence", __name__, url_prefix="/batches")


@bp.post("/<int:batch_id>/evidence")
def start(batch_id: int):
    started = start_evidence(db.session, batch_id=batch_id, user=current_user, now=utcnow())
    db.session.commit()
    if started.created:
        SIGNED_ZIP.enqueue(started.export.id, job_id=SIGNED_ZIP.job_id(id=started.export.id))
    if request.headers.get("HX-Request"):
        return render_template("batches/_evidence.html", evidence=started.export, batch_id=batch_id)
    flash(_("The evidence package is being built; its download appears on this page when it is ready."), "info")
    return redirect(url_for("batches.detail", batch_id=batch_id))


@bp.get("/<int:batch_id>/evidence/<int:export_id>")
def status(batch_id: int, export_id: int):
    package = latest_export(db.session, batch_id=batch_id, export_id=export_id, kind=EVIDENCE) or abort(404)
    return render_template("batches/_evidence.html", evidence=package, batch_id=batch_id)


@bp.get("/<int:batch_id>/evidence/<int:export_id>/download")
def download(batch_id: int, export_id: int):
    package = latest_export(db.session, batch_id=batch_id, export_id=export_id, kind=EVIDENCE) or abort(404)
    storage = get_storage()
    if package.status != "ready" or not package.storage_key or not storage.exists(package.storage_key):
        abort(404)
    return streamed_attachment(
        storage.chunks(package.storage_key), mimetype="application/zip", filename=f"batch-{batch_id}-evidence.zip"
    )


def init_app(app) -> None:
    @app.template_global()
    def latest_evidence(batch_id: int):
        """The batch's newest evidence package, for its page."""
        return latest_export(db.session, batch_id=batch_id, kind=EVIDENCE)
