"""Queue ``mail``: text a one-time code to a recipient's phone (queued ahead of bulk mail: it lives 10 minutes)."""

from __future__ import annotations

import logging

from flask import current_app

from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.mail import sms
from bulksign.models import utcnow
from bulksign.signing.one_time_codes import code_text
from bulksign.work.queues import SMS_CODE, job

logger = logging.getLogger(__name__)


@job(SMS_CODE)
def send_code(code_id: int) -> str:
    """Send the SMS of one code; an SmsError makes RQ try again after a backoff, while the code still counts."""
    found = code_text(db.session, code_id=code_id, secret=current_app.config["SECRET_KEY"], now=utcnow())
    if found is None:
        db.session.rollback()
        return "skipped: the code no longer counts"
    row, text = found
    to, request_id = row.destination, row.request_id
    db.session.rollback()  # no transaction held open while the provider answers
    sms.provider(current_app.config).send(to=to, text=text)
    log(logger, logging.INFO, "one-time code sent by SMS", code_id=code_id, request_id=request_id)
    return "sent"
