"""A clerk checks a Word file in the browser: the tags copied from the palette, the file uploaded, the sample pages
shown with each tag framed in its party's colour and a misspelt tag named with the one meant. Screenshots and axe
at 1366 and 360 px."""

from __future__ import annotations

import pytest
from docx import Document
from playwright.sync_api import expect

from tests.support import docx_files
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at, shoot

pytestmark = pytest.mark.browser


@pytest.mark.slow(seconds=15)
def test_a_clerk_checks_a_word_file_and_sees_each_tag_in_place(users, live_server, page, run_jobs, tmp_path):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    document = Document()
    document.add_heading("Employment contract", level=1)
    document.add_paragraph("Between ACME Ltd and {{ name }}, contract {{ contract_no }}, from {{ start_date }}.")
    document.add_paragraph("The employee is paid monthly. Notice period: one month.")
    document.add_paragraph("Employee: {{ Signature }}")
    document.add_paragraph("{{ signature }}")
    document.add_paragraph("Employer, {{ field_signer_name_employer }}: {{ signature employer }}")
    document.add_paragraph("{{ signature_employer }}")
    path = tmp_path / "contract.docx"
    path.write_bytes(docx_files.save(document))

    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/new")
    expect(page.locator("#word-tags")).to_be_hidden()  # HTML, the first kind, has its own palette
    page.check("input[name=kind][value=docx]")
    expect(page.locator("#word-tags")).to_be_visible()
    shoot(page, "word-template-form")
    page.click("#word-tags button[data-copy='{{ signature }}']")
    expect(page.locator("#word-tags button[data-copy='{{ signature }}']")).to_have_text("Copied")
    page.click("#word-check-link")
    look_at(page, live_server, "word-check-start")
    page.set_input_files("input[name=file]", str(path))
    page.click("#word-check-form button[type=submit]")
    expect(page.locator("#word-check-running")).to_be_visible()
    run_jobs("pdf")
    expect(page.locator("#word-check-found")).to_be_visible(timeout=10_000)
    expect(page.locator("#word-check-unknown")).to_contain_text("Did you mean {{ signature }}?")
    expect(page.locator("#word-check-unknown")).to_contain_text("Did you mean {{ signature_employer }}?")
    expect(page.locator(".check-box[data-tag=signature]")).to_have_count(1)
    expect(page.locator(".check-box[data-tag=signature_employer]")).to_have_count(1)
    page.locator("#word-check-pages img").first.evaluate("img => img.decode()")
    found = look_at(page, live_server, "word-check")
    assert found == {1366: [], 360: []}, found
    assert problems == []
