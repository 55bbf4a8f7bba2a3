"""A recipient fills every kind of field on the signing page in a real Chromium, at 1366 and 360 px:
numbered markers on the page images, a refused try said at its fields and kept, then signed with the values saved;
axe clean, no script or CSP error."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bulksign.models import utcnow
from tests.browser.test_browser_signing import INKED, draw
from tests.signing.test_field_entry import CONTRACT, FIELDS, a_png, saved
from tests.support.looks import ARTIFACTS, look_at
from tests.support.signing_page import agree
from tests.support.signing_requests import fresh, make_sent_request

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1366, 360])
def test_a_recipient_fills_every_kind_of_field_and_signs(users, live_server, page, tmp_path, width):
    problems: list[str] = []  # the refused try is a 422 on purpose
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" and "422" not in m.text else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    r = make_sent_request(now=utcnow() - timedelta(minutes=1), owner=users["staff"], html=CONTRACT, fields=FIELDS)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server}/sign/{r.token}")
    page.wait_for_function("() => [...document.querySelectorAll('.doc-page img')].every(i => i.naturalWidth > 0)")

    # Seven numbered markers over the page, each inside the page image, and the same numbers at the inputs.
    markers = page.locator(".field-marker.placed")
    assert markers.all_inner_texts() == [str(n) for n in range(1, 8)]
    image = page.locator(".doc-page img").first.bounding_box()
    for box in (markers.nth(i).bounding_box() for i in range(7)):
        assert (
            image["x"] <= box["x"] < image["x"] + image["width"]
            and image["y"] <= box["y"] < image["y"] + image["height"]
        )
    assert page.locator(".field-number").all_inner_texts() == [str(n) for n in range(1, 8)]
    found = look_at(page, live_server, "signing-fields", widths=(width,))
    assert not found[width], found

    # A marker leads to its input; the keyboard goes from one field to the next in their order.
    markers.nth(0).click()
    assert page.evaluate("location.hash") == "#field-iban"
    page.focus("#field-iban")
    page.keyboard.type("DE89 3704 0044 0532 0130 00")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "field-salary"
    page.keyboard.type("4,500.50")
    page.fill("#field-start", "2026-05-01")  # before its range
    page.select_option("#field-tax", "II")
    page.set_input_files("#field-id_scan", files=[{"name": "id.png", "mimeType": "image/png", "buffer": a_png()}])
    draw(page)
    agree(page)
    page.click("#sign-button")
    page.wait_for_selector("#field-start-error")
    # The drawing came back with the page, on the pad, and the message names the fields to correct.
    page.wait_for_function(INKED, arg="#signature-pad")  # the kept drawing is an image: drawn once it loaded
    assert page.locator("#pad-kept").is_visible()
    assert "Correct these fields, each has a message: “Start date”, “I have read the work rules”" in page.inner_text(
        ".flash-error"
    )
    assert "must be from 1 January 2027 to 31 December 2027" in page.inner_text("#field-start-error")
    assert "Tick “I have read the work rules” to sign." in page.inner_text("#field-rules-error")
    assert page.get_attribute("#field-rules", "aria-invalid") == "true"
    assert page.input_value("#field-iban") == "DE89 3704 0044 0532 0130 00"
    assert page.input_value("#field-salary") == "4,500.50" and page.input_value("#field-tax") == "II"
    assert "choose it again" in page.inner_text("#field-id_scan-hint")
    found = look_at(page, live_server, "signing-fields-refused", widths=(width,))
    assert not found[width], found
    assert saved(r.id) == {}

    page.fill("#field-start", "2027-03-01")
    page.check("#field-rules")
    page.fill("#field-note", "Ring twice")
    page.set_input_files("#field-id_scan", files=[{"name": "id.png", "mimeType": "image/png", "buffer": a_png()}])
    agree(page)
    page.click("#sign-button")
    page.wait_for_selector("text=You signed this document")
    page.screenshot(path=str(ARTIFACTS / f"signing-fields-signed-{width}.png"), full_page=True)
    assert fresh(r.id).status == "signed" and fresh(r.id).signature_image
    assert {n: v.value for n, v in saved(r.id).items()} == {
        "iban": "DE89 3704 0044 0532 0130 00",
        "salary": "4500.5",
        "start": "2027-03-01",
        "rules": "true",
        "tax": "II",
        "id_scan": "id.png",
        "note": "Ring twice",
    }
    assert not problems, problems
