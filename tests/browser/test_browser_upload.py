"""Staff create a template, check a file with one bad row without leaving the page, and start the batch."""

from __future__ import annotations

import pytest

from tests.support.accounts import STAFF
from tests.support.looks import ARTIFACTS, BATCH_PAGE, log_in, save_html_template, shoot

pytestmark = pytest.mark.browser

CSV = (
    b"Email;Name;Position\r\nanna@example.com;Anna Petrova;Accountant\r\n"
    b"john@gmial.com;John Smith;Engineer\r\nivan@example.com;Ivan Sidorov;Driver\r\n"
)


def test_upload_shows_the_bad_row_in_place_and_creates_the_batch(users, live_server, page):
    log_in(page, live_server, *STAFF)

    save_html_template(
        page, live_server, name="Employment contract", html="<p>{{ name }} is hired as {{ position }}.</p>"
    )
    assert page.locator("#variables").inner_text() == "email, name, position"

    page.click("text=Start a batch")
    page.wait_for_url("**/batches/new?template_id=*")
    page.evaluate("window.stillTheSamePage = true")
    page.set_input_files("input[name=file]", files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": CSV}])
    page.click("text=Check the file")
    error_row = page.locator("#errors tbody tr")
    error_row.first.wait_for()
    assert error_row.count() == 1
    assert error_row.locator("td").all_inner_texts() == [
        "3",
        "Email",
        "The domain looks misspelt: did you mean john@gmail.com?",
    ]
    assert page.locator("#valid-rows").inner_text() == "2"
    assert page.evaluate("window.stillTheSamePage") is True  # no full reload

    # The suggestion can be accepted: the file is checked again with gmail.com, all three rows valid.
    page.click("button.accept-typo")
    page.locator(".chosen-domain").wait_for()
    assert page.locator("#valid-rows").inner_text() == "3" and page.locator("#errors").count() == 0

    # The time zone is picked from a list of zone names, not typed.
    page.select_option("select#timezone", "Europe/Moscow")
    assert page.locator("select#timezone option").count() > 300
    shoot(page, "new-batch-zone-picker")
    page.fill("input[name=name]", "Hiring, November")
    page.click("#create-batch")
    page.wait_for_url(BATCH_PAGE)
    assert "Hiring, November" in page.locator("h1").inner_text()
    assert page.locator("#create-batch").count() == 0
    from bulksign.core.extensions import db
    from bulksign.models import Batch, SigningRequest

    batch = db.session.scalar(db.select(Batch).where(Batch.name == "Hiring, November"))
    assert batch.timezone == "Europe/Moscow"
    emails = sorted(db.session.scalars(db.select(SigningRequest.email).where(SigningRequest.batch_id == batch.id)))
    assert emails == ["anna@example.com", "ivan@example.com", "john@gmail.com"]


def test_a_hostile_or_careless_file_gets_its_reason_in_place(users, live_server, page):
    """The whole-sheet workbook is refused at once; an open quote is a row error naming its line."""
    from pathlib import Path

    from bulksign.core.extensions import db
    from bulksign.doc_templates.versions import create_template
    from tests.support.clock import NOW
    from tests.support.hostile_files import stray_quote_csv, whole_sheet_xlsx

    template = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    db.session.commit()
    log_in(page, live_server, *STAFF)
    artifacts = ARTIFACTS
    artifacts.mkdir(exist_ok=True)
    for name, data, expected in (
        ("people.xlsx", whole_sheet_xlsx(), "beyond the limit of 200 columns"),
        ("people.csv", stray_quote_csv(), "Line 2: a quote opens here and is never closed"),
    ):
        page.goto(f"{live_server}/batches/new?template_id={template.template.id}")
        page.set_input_files(
            "input[name=file]", files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}]
        )
        page.click("text=Check the file")
        page.locator(f"text={expected}").first.wait_for()
        for width in (1366, 360):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=str(artifacts / f"upload-refused-{Path(name).suffix[1:]}-{width}.png"), full_page=True)


def test_a_listed_address_is_a_warning_with_its_reason_and_is_not_mailed(users, live_server, page):
    """An address on the suppression list: warned about in the check, created failed with the reason."""
    from bulksign.core.extensions import db
    from bulksign.doc_templates.versions import create_template
    from bulksign.models import SigningRequest
    from bulksign.recipients.suppressions import suppress
    from tests.support.clock import NOW

    template = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    suppress(db.session, email="ivan@example.com", source="complaint", reason="abuse report", now=NOW)
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/new?template_id={template.template.id}")
    page.set_input_files("input[name=file]", files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": CSV}])
    page.click("text=Check the file")
    page.locator("#suppressed").wait_for()
    assert page.locator("#suppressed tbody tr td").all_inner_texts()[:2] == ["4", "ivan@example.com"]
    assert "marked our mail as spam (abuse report)" in page.locator("#suppressed").inner_text()
    shoot(page, "new-batch-suppressed-warning")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("#create-batch")
    page.wait_for_url(BATCH_PAGE)
    assert "1 address is on the suppression list and was not mailed" in page.inner_text("main")
    listed = db.session.scalar(db.select(SigningRequest).where(SigningRequest.email == "ivan@example.com"))
    assert listed.status == "failed" and "Not sent" in listed.error_message
