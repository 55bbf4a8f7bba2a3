"""The default mail texts: kept on the web form (a browser's \\r\\n line endings and all), they go out in the batch's
language, text and HTML parts alike, in invitations and reminders."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from flask_babel import force_locale, gettext
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.mail_texts import DEFAULT_EMAIL_BODY, DEFAULT_REMINDER_BODY, MAIL_FIELDS, mail_text
from bulksign.doc_templates.versions import get_version
from bulksign.jobs.periodic import send_due_reminders
from bulksign.models import DocumentTemplate, TemplateVersion
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.web import csrf_from

#: The Russian of the default texts and of the HTML part's frame (the button, the footer), and English that would
#: show one of them went out untranslated.
RUSSIAN_INVITATION = ("Здравствуйте, Anna!", "просит вас подписать «Employment contract»")
RUSSIAN_REMINDER = ("Здравствуйте, Anna!", "Напоминаем: «Employment contract» от staff@example.com")
RUSSIAN_FRAME = ("Открыть документ для подписи", "Ссылка персональная: не пересылайте это письмо.")
ENGLISH = ("Hello", "asks you to sign", "A friendly reminder", "Open the document", "The link is personal", "Sent for")


def _template_kept_with_the_default_texts(client) -> TemplateVersion:
    """A template saved on the web form with the mail texts it offers, sent back as a browser sends a textarea
    (every line ending in \\r\\n)."""
    page = client.get("/templates/new")
    html = page.get_data(as_text=True)
    shown = {
        field: unescape(
            re.search(
                rf'name="{field}" value="([^"]*)"|<textarea name="{field}"[^>]*>(.*?)</textarea>', html, re.S
            ).group(1, 2)[field.endswith("body")]
        )
        for field in MAIL_FIELDS
    }
    assert shown["email_body"].startswith("Hello{% if name %} {{ name }}{% endif %},\n\n")
    data = {field: text.replace("\n", "\r\n") for field, text in shown.items()}
    response = client.post(
        "/templates/new",
        data={"csrf_token": csrf_from(page), "name": "Employment contract", "html": "<p>{{ name }}</p>", **data},
    )
    assert response.status_code == 302
    return get_version(db.session, template_id=db.session.scalar(select(DocumentTemplate.id)))


def _assert_russian(mail, *, words: tuple[str, ...]) -> None:
    text, html = mail.text(), mail.html()
    assert all(w in text for w in words) and all(w in html for w in words + RUSSIAN_FRAME), (text, html)
    assert '<html lang="ru">' in html
    assert not [w for w in ENGLISH if w in text or w in html], (text, html)


def test_a_russian_batch_on_a_template_kept_with_the_web_forms_default_texts_is_invited_all_in_russian(
    app, users, client, auth, smtp, run_jobs
):
    auth.login()
    version = _template_kept_with_the_default_texts(client)
    batch = make_batch(
        user=users["staff"], now=NOW, recipients=[("anna@example.com", "Anna")], version=version, language="ru"
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (invitation,) = smtp.of_kind("invitation")
    assert invitation.subject == "Пожалуйста, подпишите: Employment contract"
    _assert_russian(invitation, words=RUSSIAN_INVITATION)


def test_a_russian_batch_on_a_template_kept_with_the_web_forms_default_texts_is_reminded_all_in_russian(
    app, users, client, auth, smtp, run_jobs
):
    auth.login()
    version = _template_kept_with_the_default_texts(client)
    batch = make_batch(
        user=users["staff"], now=NOW, recipients=[("anna@example.com", "Anna")], version=version, language="ru"
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (req,) = requests_of(batch)
    assert send_due_reminders(now=req.sent_at + timedelta(days=2)).startswith("1 reminders queued")
    run_jobs("mail")
    (reminder,) = smtp.of_kind("reminder")
    assert reminder.subject == "Напоминание: «Employment contract» ждёт вашей подписи"
    _assert_russian(reminder, words=RUSSIAN_REMINDER)


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
@pytest.mark.parametrize("default", [DEFAULT_EMAIL_BODY, DEFAULT_REMINDER_BODY])
def test_a_default_text_stored_with_other_line_endings_is_still_mailed_in_the_batchs_language(app, default, ending):
    # Versions saved before the line endings were normalised keep a browser's \r\n.
    with force_locale("ru"):
        russian = gettext(default)
    assert russian.startswith("Здравствуйте") and mail_text(default.replace("\n", ending), language="ru") == russian
