"""The open-tracking pixel of invitation mails: records the first open, always answers a GIF."""

from __future__ import annotations

import base64
import logging

from flask import Blueprint, Response, current_app
from flask_login import current_user

from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.people.auth import public
from bulksign.signing.invitations import pixel_request_id, record_email_open

bp = Blueprint("tracking", __name__)
logger = logging.getLogger(__name__)

#: The smallest transparent GIF (1×1).
PIXEL = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")


@bp.get("/t/<path:name>")
@public
def pixel(name: str):
    """Never an error: a mail client shows a broken image for anything but a GIF."""
    request_id = pixel_request_id(name=name, secret=current_app.config["SECRET_KEY"])
    # Staff looking at a mail (the admin's mailbox of caught mail) are not the recipient opening it.
    if request_id is not None and not current_user.is_authenticated:
        try:
            record_email_open(db.session, request_id=request_id, now=utcnow())
        except Exception:  # the pixel must render whatever the database says
            db.session.rollback()
            logger.exception("email open not recorded", extra={"fields": {"request_id": request_id}})
    response = Response(PIXEL, mimetype="image/gif")
    response.headers["Cache-Control"] = "no-store, max-age=0"
    return response
