"""The default invitation and reminder greet by name only a row that has one: a file of addresses alone
goes out with the default texts, in both languages; a version that kept an earlier release's default (``Hello
{{ name }},``) is still the default; a text of staff's own that prints ``{{ name }}`` on every row still needs it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from bulksign.core.extensions import db
from bulksign.doc_templates.columns import MAIL, OPTIONAL, needed_columns
from bulksign.doc_templates.mail_texts import DEFAULT_EMAIL_BODY, DEFAULT_REMINDER_BODY, mail_text
from bulksign.doc_templates.versions import create_template
from bulksign.jobs.periodic import send_due_reminders
from bulksign.models import TemplateVersion
from bulksign.recipients.validation import validate_recipients
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW

#: The default bodies as releases before this one stored them.
FORMER = {
    "email_body": DEFAULT_EMAIL_BODY.replace("Hello{% if name %} {{ name }}{% endif %},", "Hello {{ name }},"),
    "reminder_body": DEFAULT_REMINDER_BODY.replace("Hello{% if name %} {{ name }}{% endif %},", "Hello {{ name }},"),
}


def _version(users, **fields) -> TemplateVersion:
    saved = create_template(
        db.session, name="Employment contract", html="<p>{{ position }}</p>", user=users["staff"], now=NOW, **fields
    )
    db.session.commit()
    return saved.version


def _check(version, body: bytes):
    return validate_recipients(body, filename="people.csv", variables=needed_columns(version))


def test_a_file_of_addresses_alone_passes_with_the_default_texts(app, users):
    version = _version(users)
    assert needed_columns(version) == {"name": OPTIONAL, "position": "document"}
    report = _check(version, b"email,position\na@example.com,Clerk\nb@example.com,Driver\n")
    assert (report.valid_rows, report.errors) == (2, ())


def test_a_text_that_prints_the_name_on_every_row_still_needs_it(app, users):
    version = _version(users, email_body="Dear {{ name }}, please sign: {{ signing_link }}")
    assert needed_columns(version)["name"] == MAIL
    report = _check(version, b"email,position\na@example.com,Clerk\n")
    assert [(e.column, str(e.message)) for e in report.errors] == [
        ("name", 'The column "name" is missing: the invitation or reminder mail prints {{ name }}.')
    ]


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_version_that_kept_an_earlier_default_is_still_the_default(app, users, ending):
    version = _version(users)
    # Stored by an earlier release, as it then was (a browser's line endings or not).
    db.session.execute(
        update(TemplateVersion)
        .where(TemplateVersion.id == version.id)
        .values(**{f: text.replace("\n", ending) for f, text in FORMER.items()})
    )
    db.session.commit()
    db.session.refresh(version)
    assert needed_columns(version)["name"] == OPTIONAL
    assert mail_text(version.email_body, language="ru").startswith("Здравствуйте{% if name %}, {{ name }}{% endif %}!")
    assert mail_text(version.reminder_body, language="en") == DEFAULT_REMINDER_BODY
    # Saved again (a new version made from it), it is today's default.
    again = create_template(
        db.session, name="Again", html="<p>x</p>", user=users["staff"], now=NOW, email_body=FORMER["email_body"]
    ).version
    assert again.email_body == DEFAULT_EMAIL_BODY


@pytest.mark.parametrize(
    ("language", "nameless", "named"),
    [("en", "Hello,\n", "Hello Anna,\n"), ("ru", "Здравствуйте!\n", "Здравствуйте, Anna!\n")],
)
def test_the_default_mails_greet_a_row_without_a_name_without_one(
    app, users, smtp, run_jobs, language, nameless, named
):
    batch = make_batch(
        user=users["staff"],
        now=NOW,
        recipients=[("nobody@example.com", ""), ("anna@example.com", "Anna")],
        language=language,
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    invitations = {m.rcpt_tos[0]: m.text().replace("\r\n", "\n") for m in smtp.of_kind("invitation")}
    assert invitations["nobody@example.com"].startswith(nameless), invitations
    assert invitations["anna@example.com"].startswith(named), invitations
    assert "nobody@example.com," not in invitations["nobody@example.com"]
    last_sent = max(r.sent_at for r in requests_of(batch))
    assert send_due_reminders(now=last_sent + timedelta(days=2)).startswith("2 reminders queued")
    run_jobs("mail")
    reminders = {m.rcpt_tos[0]: m.text().replace("\r\n", "\n") for m in smtp.of_kind("reminder")}
    assert reminders["nobody@example.com"].startswith(nameless) and reminders["anna@example.com"].startswith(named)
