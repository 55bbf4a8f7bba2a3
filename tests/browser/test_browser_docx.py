"""A Word template in Chromium: choose the kind, upload the .docx, see its variables and the PDF preview."""

from __future__ import annotations

import json

import pytest

from tests.support import docx_files
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at

pytestmark = pytest.mark.browser

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_staff_make_a_word_template_and_preview_it(live_server, page, users):
    base = live_server
    log_in(page, base, *STAFF)
    page.goto(f"{base}/templates/new")
    assert page.locator("#html-source").is_visible()
    page.check("input[name=kind][value=docx]")
    assert not page.locator("#html-source").is_visible()  # a Word template is a file: no HTML editor
    page.fill("input[name=name]", "Трудовой договор")
    page.set_input_files(
        "input[name=file]", files=[{"name": "contract.docx", "mimeType": DOCX, "buffer": docx_files.contract()}]
    )
    problems = {"form": {w: v for w, v in look_at(page, base, "template-word-form").items() if v}}
    page.click("main button[type=submit]")
    page.wait_for_selector("#kind")
    assert page.inner_text("#kind") == "Word (.docx)"
    assert "city" in page.inner_text("#variables") and "salary" in page.inner_text("#variables")
    page.click("text=Preview")
    page.wait_for_selector("iframe.pdf-preview")
    problems["detail"] = {w: v for w, v in look_at(page, base, "template-word-detail").items() if v}
    assert all(not found for found in problems.values()), json.dumps(problems, indent=1, ensure_ascii=False)
