"""The Word converter starting, as staff see it in Chromium: the first preview's frame and a young Word batch say so."""

from __future__ import annotations

import pytest

from bulksign.core.extensions import db
from bulksign.documents import libreoffice
from bulksign.models import utcnow
from tests.support import docx_files
from tests.support.accounts import STAFF
from tests.support.batchdata import batch_in_states
from tests.support.looks import log_in, shoot

pytestmark = pytest.mark.browser

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
STARTING = {
    "en": "Word converter is starting, this takes a few seconds…",
    "ru": "Запускается конвертер Word, это займёт несколько секунд…",
}


def _word_template(page, base: str) -> str:
    """Upload a Word template through the form; returns its page's URL."""
    page.goto(f"{base}/templates/new")
    page.check("input[name=kind][value=docx]")
    page.fill("input[name=name]", "Contract")
    page.set_input_files(
        "input[name=file]", files=[{"name": "contract.docx", "mimeType": DOCX, "buffer": docx_files.contract()}]
    )
    page.click("main button[type=submit]")
    page.wait_for_selector("#kind")
    # Its scripts run too (htmx binds the Preview button once the page has loaded): on a busy machine a click before
    # that does nothing.
    page.wait_for_load_state("load")
    return page.url


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_first_word_preview_says_the_converter_is_starting_then_shows_the_pdf(
    app, users, live_server, page, language
):
    users["staff"].locale = language
    db.session.commit()
    libreoffice.converter().stop()  # this web process's LibreOffice is cold, as after a restart
    log_in(page, live_server, *STAFF)
    detail = _word_template(page, live_server)
    page.click("#preview-button, button:has-text('Preview'), button:has-text('Предпросмотр')")
    frame = page.frame_locator("iframe.pdf-preview")
    assert frame.locator("#word-converter-starting").inner_text() == STARTING[language]
    shoot(page, f"template-word-preview-starting-{language}")
    # Then the frame loads the PDF (the converter's start included).
    page.wait_for_function(
        "() => { const f = document.querySelector('iframe.pdf-preview');"
        " return f && f.contentWindow && f.contentWindow.location.href.includes('preview.pdf'); }",
        timeout=90_000,
    )
    assert libreoffice.converter().warm
    # Warm now: the next preview goes straight to the PDF.
    page.goto(detail)
    page.click("button:has-text('Preview'), button:has-text('Предпросмотр')")
    page.wait_for_selector("iframe.pdf-preview")
    assert page.locator("iframe.pdf-preview").get_attribute("src").endswith("version=1") or "preview.pdf" in (
        page.locator("iframe.pdf-preview").get_attribute("src") or ""
    )
    assert page.locator("iframe.pdf-preview").get_attribute("srcdoc") is None


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_young_word_batch_with_no_document_yet_says_the_converter_is_starting(
    app, users, live_server, page, language
):
    users["staff"].locale = language
    batch = batch_in_states(db.session, statuses=["pending"] * 35, now=utcnow(), user_id=users["staff"].id)
    batch.template_version.kind = "docx"
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/{batch.id}")
    said = page.inner_text("#progress")
    assert {"en": "preparing documents 0/35", "ru": "подготовка документов 0/35"}[language] in said
    assert {
        "en": "the Word converter is starting, this takes a few seconds",
        "ru": "запускается конвертер Word, это займёт несколько секунд",
    }[language] in page.inner_text("#word-converter-starting")
    shoot(page, f"batch-word-converter-starting-{language}")


def test_an_html_batch_or_an_old_word_batch_does_not_blame_the_converter(client, auth, users):
    html = batch_in_states(db.session, statuses=["pending"] * 3, now=utcnow(), user_id=users["staff"].id)
    old = batch_in_states(db.session, statuses=["pending"] * 3, now=utcnow(), user_id=users["staff"].id, name="Old")
    old.template_version.kind = "docx"
    old.created_at = old.started_at = utcnow().replace(year=2025)
    db.session.commit()
    auth.login()
    for batch in (html, old):
        assert 'id="word-converter-starting"' not in client.get(f"/batches/{batch.id}").get_data(as_text=True)
