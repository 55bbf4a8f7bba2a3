"""Staff upload a PDF without form fields, draw boxes on its page in a real Chromium, bind them to columns, and
the rendered documents print each recipient's value inside the box drawn."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest

from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at
from tests.support.pdf_files import plain_pdf

pytestmark = pytest.mark.browser


def _draw(page, figure, frm: tuple[float, float], to: tuple[float, float]) -> None:
    """Press at ``frm`` and release at ``to``, as fractions of the page image (scrolled to where they are)."""
    box = figure.bounding_box()
    # Scrolled at once (a wheel scrolls later, smoothly): the box read next is where the pointer lands.
    page.evaluate("dy => window.scrollBy({top: dy, behavior: 'instant'})", box["y"] + frm[1] * box["height"] - 300)
    box = figure.bounding_box()
    page.mouse.move(box["x"] + frm[0] * box["width"], box["y"] + frm[1] * box["height"])
    page.mouse.down()
    page.mouse.move(box["x"] + to[0] * box["width"], box["y"] + to[1] * box["height"], steps=8)
    page.mouse.up()


def _words(pdf: bytes) -> list[tuple[str, float, float, float, float]]:
    """(word, x0, top, x1, bottom) in points from the top-left corner of page 1."""
    out = subprocess.run(
        ["pdftotext", "-bbox", "-f", "1", "-l", "1", "-", "-"], input=pdf, capture_output=True, check=True
    ).stdout
    return [
        (w.text, float(w.get("xMin")), float(w.get("yMin")), float(w.get("xMax")), float(w.get("yMax")))
        for w in ET.fromstring(out).iter("{http://www.w3.org/1999/xhtml}word")
    ]


def test_staff_place_boxes_on_a_plain_pdf_and_each_document_prints_the_value_in_its_box(users, live_server, page):
    from bulksign.core.extensions import db
    from bulksign.doc_templates import kinds as template_kinds
    from bulksign.doc_templates.versions import get_version
    from bulksign.models import DocumentTemplate

    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Offer letter (PDF)")
    page.set_input_files(
        "input[name=file]",
        files=[{"name": "offer.pdf", "mimeType": "application/pdf", "buffer": plain_pdf(text="Offer")}],
    )
    page.click("main button[type=submit]")
    assert page.locator("#kind").inner_text() == "PDF"
    page.click("#place-fields")
    page.wait_for_url("**/place")
    figure = page.locator(".pdf-page").first
    page.wait_for_function(
        "() => document.querySelector('.pdf-page img').complete"
        " && document.querySelector('.pdf-page img').naturalWidth > 0"
    )

    # The name goes in a box drawn near the foot of the page, the signature beside it.
    _draw(page, figure, (0.12, 0.80), (0.55, 0.83))
    page.locator(".box-row [data-role=name]").last.fill("full_name")
    page.locator(".box-row [data-role=size]").last.fill("14")
    _draw(page, figure, (0.60, 0.78), (0.92, 0.88))
    page.locator(".box-row [data-role=name]").last.fill("signature")
    assert page.locator(".pdf-box").count() == 2 and page.locator(".pdf-box.is-signature").count() == 1
    assert page.locator(".pdf-box-label").first.inner_text() == "full_name"
    found = {w: v for w, v in look_at(page, live_server, "pdf-template-place-boxes").items() if v}
    assert not found, found
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("text=Save as a new version")
    page.wait_for_url("**/templates/*")
    assert page.locator("#placed-boxes").inner_text() == "2"
    assert "full_name" in page.locator("#variables").inner_text()

    db.session.expire_all()
    version = get_version(db.session, template_id=db.session.scalar(db.select(DocumentTemplate.id)))
    name_box = next(b for b in version.pdf_boxes if b["name"] == "full_name")
    assert (name_box["font_size"], round(name_box["w"] / 595.28, 2)) == (14, 0.43)
    pdf = template_kinds.render_document(version, {"full_name": "Анна Петрова", "email": "a@example.com"}, timeout=30)
    # The value is printed inside the box drawn (pdftotext measures from the top, the box from the bottom).
    words = [w for w in _words(pdf) if w[0] in ("Анна", "Петрова")]
    assert len(words) == 2
    top = 841.89 - (name_box["y"] + name_box["h"])
    for _, x0, y0, x1, y1 in words:
        assert (
            name_box["x"] <= x0
            and x1 <= name_box["x"] + name_box["w"]
            and top - 1 <= y0
            and y1 <= top + name_box["h"] + 1
        )

    # Shown again with the boxes saved; moving one with the pointer and saving makes version 3.
    page.goto(f"{live_server}/templates/{version.template_id}/place")
    assert page.locator(".pdf-box").count() == 2
    page.wait_for_function("() => document.querySelector('.pdf-page img').naturalWidth > 0")
    page.locator(".pdf-box").first.scroll_into_view_if_needed()
    first = page.locator(".pdf-box").first.bounding_box()
    page.mouse.move(first["x"] + 20, first["y"] + 5)
    page.mouse.down()
    page.mouse.move(first["x"] + 20, first["y"] - 95, steps=5)
    page.mouse.up()
    page.click("text=Save as a new version")
    page.wait_for_url("**/templates/*")
    db.session.expire_all()
    moved = next(
        b for b in get_version(db.session, template_id=version.template_id).pdf_boxes if b["name"] == "full_name"
    )
    assert moved["y"] > name_box["y"] + 40 and abs(moved["x"] - name_box["x"]) < 2
