"""Staff reading an invitation are not the recipient opening it (no "Email opened" event)."""

from __future__ import annotations

import html as html_lib
import re

from flask import current_app
from sqlalchemy import func, select

from bulksign.core.extensions import db
from bulksign.mail.devmail import mailbox_folder, write_caught
from bulksign.models import Event
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW


def _opens() -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(Event).where(Event.type == "email.opened"))


def _invitation(users, smtp, run_jobs):
    """A real invitation, sent to the test SMTP server, and kept in the mailbox as the catcher would."""
    batch = make_batch(user=users["staff"], now=NOW, recipients=1)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (mail,) = smtp.of_kind("invitation")
    name = write_caught(mailbox_folder(current_app.config["VAR_DIR"]), mail.message.as_bytes())
    return batch, mail, name


def test_an_admin_reading_a_caught_invitation_loads_no_open_pixel(app, users, smtp, run_jobs, client, auth):
    batch, mail, name = _invitation(users, smtp, run_jobs)
    assert "/t/" in mail.html()
    auth.login_admin()
    page = client.get(f"/admin/mailbox/{name}")
    assert page.status_code == 200
    shown = html_lib.unescape(page.get_data(as_text=True))
    assert "/t/" not in shown and "/sign/" in shown
    # Whatever images the page shows, the browser fetches: none of them is an open.
    for src in re.findall(r'<img[^>]+src="http://127\.0\.0\.1:5000([^"]+)"', shown):
        client.get(src)
    assert _opens() == 0 and requests_of(batch)[0].email_opened_at is None


def test_a_pixel_hit_with_a_staff_session_records_nothing(app, users, smtp, run_jobs, client, auth):
    batch, mail, _ = _invitation(users, smtp, run_jobs)
    pixel = re.search(r'<img src="http://127.0.0.1:5000([^"]+)"', mail.html()).group(1)
    auth.login()
    response = client.get(pixel)
    assert response.status_code == 200 and response.mimetype == "image/gif"
    assert _opens() == 0 and requests_of(batch)[0].email_opened_at is None
    auth.logout()
    client.get(pixel)  # the recipient's own open still counts
    assert _opens() == 1
