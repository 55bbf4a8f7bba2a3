"""The template pages as staff see them: the empty list names all three kinds, a
template's page says which columns every row must fill and which may stay empty, a PDF template shows where its
signature goes, and a preview that cannot be made says why inside its frame, without the app around it."""

from __future__ import annotations

import pytest

from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at, save_html_template
from tests.support.pdf_files import contract_form

pytestmark = pytest.mark.browser

CONTRACT = (
    "<p>Contract made with {{ name }} for the position {{ position }}.</p>\n"
    "{% if department %}<p>Department: {{ department }}</p>{% endif %}\n"
    "<p>Bonus: {{ bonus|default('none') }}</p>"
)
WORDS = {
    "en": {
        "empty": "Word document (.docx)",
        "failed": "The preview could not be made.",
        "why": "calculates with text as if it were a number",
    },
    "ru": {
        "empty": "документа Word (.docx)",
        "failed": "Предпросмотр не удался.",
        "why": "вычисляет с текстом как с числом",
    },
}


def _no_blocking(found: dict) -> None:
    assert all(not violations for violations in found.values()), found


@pytest.mark.parametrize("locale", ["en", "ru"])
def test_the_template_pages_say_what_each_row_needs_where_the_signature_goes_and_why_a_preview_failed(
    users, live_server, page, locale
):
    from bulksign.core.extensions import db
    from bulksign.models import DocumentTemplate, TemplateVersion, utcnow

    users["staff"].locale = locale
    db.session.commit()
    words = WORDS[locale]
    log_in(page, live_server, *STAFF)

    page.goto(f"{live_server}/templates/")
    assert words["empty"] in page.locator("#no-templates").inner_text()
    _no_blocking(look_at(page, live_server, f"templates-empty-{locale}"))

    page.set_viewport_size({"width": 1366, "height": 900})
    save_html_template(page, live_server, name="Employment contract", html=CONTRACT)
    assert page.locator("#variables").inner_text() == "email, name, position"
    assert page.locator("#optional-variables").inner_text().splitlines()[0] == "bonus, department"
    _no_blocking(look_at(page, live_server, f"template-columns-{locale}"))

    # A version saved before templates were filled in at save: the preview frame says why, in a page of its own.
    template_id = db.session.query(DocumentTemplate.id).filter_by(name="Employment contract").scalar()
    first = db.session.query(TemplateVersion).filter_by(template_id=template_id).one()
    db.session.add(
        TemplateVersion(
            template_id=template_id,
            version=2,
            kind="html",
            html="<p>Salary per month:</p>\n<p>{{ salary / 12 }}</p>",
            variables=["salary"],
            email_subject=first.email_subject,
            email_body=first.email_body,
            reminder_subject=first.reminder_subject,
            reminder_body=first.reminder_body,
            created_at=utcnow(),
        )
    )
    db.session.query(DocumentTemplate).filter_by(id=template_id).update({"latest_version": 2})
    db.session.commit()
    page.goto(f"{live_server}/templates/{template_id}?version=2")
    page.click("button[hx-get*=preview]")
    frame = page.frame_locator("iframe.pdf-preview")
    problem = frame.locator("#preview-error")
    problem.wait_for()
    text = problem.inner_text()
    assert words["failed"] in text and words["why"] in text and "{{ salary|int * 12 }}" in text
    assert frame.locator("nav").count() == 0 and "422" not in text
    page.locator("iframe.pdf-preview").scroll_into_view_if_needed()
    _no_blocking(look_at(page, live_server, f"template-preview-failed-{locale}"))

    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Signed form")
    page.set_input_files(
        "input[name=file]",
        files=[{"name": "form.pdf", "mimeType": "application/pdf", "buffer": contract_form(signature=True)}],
    )
    page.click("main button[type=submit]")
    assert "signature" in page.locator("#all-variables").inner_text().split(", ")
    image = page.locator("#signature-place img")
    image.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const i = document.querySelector('#signature-place img'); return i && i.complete "
        "&& i.naturalWidth > 0; }"
    )
    box, picture = page.locator("#signature-place .pdf-box").bounding_box(), image.bounding_box()
    # The form's field is at x 300-500, y 40-100 of an A4 page (595 x 842 pt): the lower right of page 2.
    assert 0.45 < (box["x"] - picture["x"]) / picture["width"] < 0.55
    assert 0.82 < (box["y"] + box["height"] - picture["y"]) / picture["height"] < 0.98
    _no_blocking(look_at(page, live_server, f"template-pdf-signature-{locale}"))
