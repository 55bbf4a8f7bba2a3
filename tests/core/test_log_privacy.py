"""What the logs say of a batch's recipients: ids, never their addresses or names, whatever happens to their mail."""

from __future__ import annotations

import io
import logging
import re
import signal

from flask import g

from bulksign.core.extensions import db, get_redis
from bulksign.core.logs import JsonFormatter
from bulksign.doc_templates.versions import create_template
from bulksign.models import utcnow
from bulksign.work.queues import QUEUE_NAMES, get_queue
from tests.support.web import csrf_from
from tests.support.workers import CountingWorker

#: Anna signs, Gone's mail server refuses her address, Bob's row is left out for his.
FILE = (
    b"email,name,salary\n"
    b"anna.karenina@example.com,Anna Karenina,100\n"
    b"gone.person@example.com,Gone Person,5\n"
    b"bob.builder@example,Bob Builder,200\n"
)
PEOPLE = ("anna.karenina", "gone.person", "bob.builder", "Karenina", "Gone Person", "Bob Builder")


def _work() -> None:
    """Every queue until empty, by a worker logging at INFO as ``flask worker`` runs it."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker = CountingWorker([get_queue(n) for n in QUEUE_NAMES], connection=get_redis())
        worker.work(burst=True, logging_level="INFO", with_scheduler=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_the_logs_of_a_whole_batch_hold_no_recipient_address_nor_name(app, users, client, auth, smtp):
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    handler.setFormatter(JsonFormatter())  # what the app writes in production (LOG_JSON)
    handler.setLevel(logging.INFO)
    watched = [logging.getLogger(name) for name in ("bulksign", "rq")]
    levels = [logger.level for logger in watched]
    for logger in watched:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    smtp.handler.reject_recipients["gone.person@example.com"] = "550 5.1.1 <gone.person@example.com>: no such user"
    try:
        template = create_template(
            db.session, name="Pay", html="<p>{{ name }}: {{ salary }}</p>", user=users["staff"], now=utcnow()
        ).template
        db.session.commit()
        auth.login()
        page = client.get(f"/batches/new?template_id={template.id}")
        preview = client.post(
            "/batches/new/validate",
            content_type="multipart/form-data",
            data={"csrf_token": csrf_from(page), "template_id": template.id, "file": (io.BytesIO(FILE), "p.csv")},
        )
        upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)
        token = re.search(r'name="form_token" value="([0-9a-f]+)"', page.get_data(as_text=True)).group(1)
        made = client.post(
            "/batches/new", data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": token}
        )
        assert made.status_code == 303
        client.get(f"{made.headers['Location']}?q=anna.karenina%40example.com")
        _work()
        (invitation,) = [m for m in smtp.received if "anna.karenina@example.com" in m.rcpt_tos]
        link = re.search(r"/sign/([A-Za-z0-9_.~-]+)", invitation.text()).group(1)
        recipient = app.test_client()
        g.pop("csrf_token", None)  # the test's app context is every request's: the staff's token is cached in it
        form = recipient.get(f"/sign/{link}")
        signed = recipient.post(
            f"/sign/{link}/sign", data={"csrf_token": csrf_from(form), "name": "Anna Karenina", "consent": "yes"}
        )
        assert signed.status_code == 303
        _work()
    finally:
        for logger, level in zip(watched, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)

    lines = written.getvalue().splitlines()
    messages = {re.search(r'"message": "([^"]*)"', line).group(1) for line in lines}
    # The run was logged: the batch, its mails (the refused one too), the signature and the seal.
    assert {"batch created", "mail sent", "mail bounced", "request signed", "signed document sealed"} <= messages
    assert [line for line in lines if any(person.lower() in line.lower() for person in PEOPLE)] == []
