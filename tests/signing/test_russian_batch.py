"""A Russian batch speaks Russian end to end: every mail, page and signed PDF it produces is scanned for the English
of our own catalog (the msgids that have a Russian translation), so a missing gettext or a hard-coded English
string anywhere on the recipient's or the owner's way shows up here."""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta
from html import unescape

from babel.messages.pofile import read_po

from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.jobs.periodic import send_due_reminders
from bulksign.models import User
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.sealed import signed_document
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from

CATALOG = "bulksign/translations/ru/LC_MESSAGES/messages.po"
#: A Russian contract, so that nothing English in the outputs comes from the template.
CONTRACT = (
    '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'"><h1>Трудовой договор</h1>'
    "<p>Работник: {{ name }}. Оклад: {{ salary }} рублей.</p></body>"
)
#: A placeholder (%(name)s, %s, {{ … }}, {% … %}) or markup: English is looked for only between them.
_NOT_TEXT = re.compile(r"%\([^)]*\)[sd]|%[sd]|\{\{.*?\}\}|\{%.*?%\}|<[^>]*>|\{[^}]*\}", re.S)


def _english_phrases() -> list[str]:
    """Every run of at least three words of a msgid that has a Russian translation, lower-cased."""
    with open(CATALOG, "rb") as f:
        catalog = read_po(f)
    phrases = set()
    for message in catalog:
        translated = message.string if isinstance(message.string, str) else any(message.string)
        if not message.id or not translated or message.fuzzy:
            continue
        for msgid in message.id if isinstance(message.id, tuple) else (message.id,):
            for segment in _NOT_TEXT.split(msgid):
                phrase = " ".join(segment.split()).strip(" ,.:;!?()\"'«»—…-").lower()
                if len(re.findall(r"\b[a-z][a-z'’-]*\b", phrase)) >= 3:
                    phrases.add(phrase)
    return sorted(phrases)


def _html_text(html: str) -> str:
    """What a reader of the HTML sees or hears: its text and the attributes shown or read out."""
    shown = re.findall(r'\b(?:alt|title|aria-label|placeholder)="([^"]*)"', html)
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S | re.I)
    return unescape(" ".join([re.sub(r"<[^>]+>", " ", body), *shown]))


def _leaks(outputs: dict[str, str], phrases: list[str]) -> dict[str, list[str]]:
    found = {}
    for where, text in outputs.items():
        flat = " ".join(text.split()).lower()
        hits = [p for p in phrases if re.search(rf"(?<![a-z]){re.escape(p)}(?![a-z])", flat)]
        if hits:
            found[where] = hits
    return found


def _pdf_text(data: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-", "-"], input=data, capture_output=True, check=True, timeout=60
    ).stdout.decode()


def _mail(smtp, kind: str, outputs: dict[str, str]):
    (mail,) = smtp.of_kind(kind)
    outputs[f"{kind} subject"] = mail.subject
    outputs[f"{kind} text"] = mail.text()
    outputs[f"{kind} html"] = _html_text(mail.html())
    return mail


def test_every_mail_page_and_signed_pdf_of_a_russian_batch_is_free_of_our_english(app, users, client, smtp, run_jobs):
    phrases = _english_phrases()
    assert "you signed this document" in phrases  # the catalog was read
    owner = db.session.get(User, users["staff"].id)
    owner.locale = "ru"  # the owner's notice speaks the owner's language
    db.session.commit()
    batch = make_batch(
        user=owner,
        now=NOW,
        recipients=[("anna@example.com", "Анна Иванова")],
        html=CONTRACT,
        name="Трудовой договор",
        language="ru",
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    outputs: dict[str, str] = {}
    invitation = _mail(smtp, "invitation", outputs)
    assert invitation.subject == "Пожалуйста, подпишите: Трудовой договор"
    token = re.search(r"/sign/([A-Za-z0-9_-]+)", invitation.text()).group(1)

    (req,) = requests_of(batch)
    assert send_due_reminders(now=req.sent_at + timedelta(days=2)).startswith("1 ")
    run_jobs("mail")
    reminder = _mail(smtp, "reminder", outputs)
    # Long enough to be folded: every space arrives (the policy's folding dropped one between encoded words).
    assert reminder.subject == "Напоминание: «Трудовой договор» ждёт вашей подписи"

    page = client.get(f"/sign/{token}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and '<html lang="ru">' in html and "Прочитать текст крупным шрифтом" in html
    assert "Работник: Анна Иванова." in _html_text(html)  # the large-print text of the document
    outputs["signing page"] = _html_text(html)
    signed = client.post(
        f"/sign/{token}/sign",
        data={"csrf_token": csrf_from(page), "name": "Анна Иванова", "consent": "yes", "signature": data_url(png())},
    )
    assert signed.status_code == 303
    outputs["signed page"] = _html_text(client.get(f"/sign/{token}").get_data(as_text=True))

    run_jobs("pdf", "mail")
    _mail(smtp, "confirmation", outputs)
    _mail(smtp, "all-signed-notice", outputs)
    db.session.expire_all()
    pdf = _pdf_text(get_storage().get(signed_document(req.id).storage_key))
    assert "Трудовой договор" in pdf and "Анна Иванова" in pdf
    outputs["signed PDF"] = pdf

    assert _leaks(outputs, phrases) == {}
