"""A recipient signs in a real Chromium: from the invitation mail to a sealed PDF that validates everywhere."""

from __future__ import annotations

import io
import re
import subprocess
from datetime import timedelta

import pytest
from pypdf import PdfReader
from sqlalchemy import select

from bulksign.batches.progress import cancel_requests
from bulksign.core.extensions import db
from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import check_seal
from bulksign.models import Event, utcnow
from bulksign.signing.recipient_actions import decline
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids
from tests.support.looks import ARTIFACTS, shoot
from tests.support.signing_page import agree, signed_bytes
from tests.support.signing_requests import fresh, make_sent_request

pytestmark = pytest.mark.browser


@pytest.fixture
def watched(page):
    """The page, with every console error and CSP violation collected (there must be none)."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.problems = problems
    return page


INKED = """(selector) => { const c = document.querySelector(selector);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  for (let i = 3; i < d.length; i += 4) { if (d[i]) return true; } return false; }"""


def draw(page, selector="#signature-pad"):
    page.wait_for_selector("#pad-box", state="visible")
    # A page image may still be loading and move the pad: draw once the layout has settled,
    # as a person would, and look again if no ink shows (a person whose stroke missed draws again).
    page.wait_for_load_state("load")
    for _ in range(3):
        page.locator(selector).scroll_into_view_if_needed()
        box = page.locator(selector).bounding_box()
        x, y = box["x"] + 20, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        for i in range(1, 30):
            page.mouse.move(x + i * 8, y + (12 if i % 2 else -12), steps=2)
        page.mouse.up()
        if page.evaluate(INKED, selector):
            return
    raise AssertionError("three strokes on the signature pad left no ink")


def test_a_recipient_signs_from_the_invitation_and_gets_a_sealed_pdf(
    app, users, live_server, watched, smtp, run_jobs, tmp_path
):
    page = watched
    batch = make_batch(
        user=users["staff"],
        now=utcnow(),
        recipients=[("olga@example.com", "Ольга Смирнова")],
        reply_to="hr@example.com",
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (invitation,) = smtp.to("olga@example.com")
    link = re.search(r"http://127\.0\.0\.1:\d+/sign/[A-Za-z0-9_-]+", invitation.text()).group(0)

    page.goto(link)
    assert page.locator("h1").inner_text() == "Employment contract"
    assert page.locator(".doc-page img").count() == 1 and page.locator("#pad-box").is_visible()
    page.wait_for_function("() => [...document.querySelectorAll('.doc-page img')].every(i => i.naturalWidth > 0)")
    assert page.input_value("input[name=name]") == "Ольга Смирнова"
    draw(page)
    page.fill("input[name=name]", "Ольга Ивановна Смирнова")
    agree(page)
    page.click("#sign-button")
    page.wait_for_selector("text=You signed this document")
    (request_id,) = request_ids(batch)
    row = fresh(request_id)
    assert row.status == "signed" and row.signature_image and row.signer_name == "Ольга Ивановна Смирнова"

    assert run_jobs("pdf") == 1  # the seal
    page.reload()
    data = signed_bytes(page)
    reader = PdfReader(io.BytesIO(data))
    stamped = " ".join(reader.pages[-2].extract_text().split())
    assert "Signed electronically" in stamped and "Ольга Ивановна Смирнова" in stamped and "IP 127.0.0.1" in stamped
    assert reader.pages[-2]["/Resources"]["/XObject"], "the drawn signature is stamped"
    audit = " ".join(reader.pages[-1].extract_text().split())
    for line in (
        "Audit certificate",
        "Employment contract",
        "olga@example.com",
        "Created",
        "Sent",
        "Page opened",
        "Signed",
        "HeadlessChrome",
        "Original sha256",
    ):
        assert line in audit, line
    assert check_seal(data, seal_key(app.config)).valid
    path = tmp_path / "signed.pdf"
    path.write_bytes(data)
    pdfsig = subprocess.run(["pdfsig", str(path)], capture_output=True, text=True, timeout=30).stdout
    assert "Signature is Valid" in pdfsig and "Total document signed" in pdfsig

    run_jobs("mail")
    confirmation = [m for m in smtp.to("olga@example.com") if m.subject.startswith("Signed")]
    (attachment,) = list(confirmation[0].message.iter_attachments())
    assert attachment.get_content() == data
    assert page.problems == []


def test_the_access_log_of_the_browsing_never_holds_the_token(app, users, live_server, page, caplog):
    r = make_sent_request(now=utcnow() - timedelta(minutes=1), owner=users["staff"])
    with caplog.at_level("INFO", logger="werkzeug"):
        page.goto(f"{live_server}/sign/{r.token}")  # the page and its page images
    lines = [record.getMessage() for record in caplog.records]
    assert any("/sign/<token>" in line for line in lines)
    assert not any(r.token in line for line in lines)


LOADED = "(img) => img.complete && img.naturalWidth > 0"


@pytest.mark.parametrize("width", [1366, 360])
def test_the_document_pages_are_readable_on_a_desktop_and_a_phone(app, users, live_server, browser, width):
    from tests.support.batches import TWO_PAGES

    r = make_sent_request(
        now=utcnow() - timedelta(minutes=1), owner=users["staff"], name="Ольга Смирнова", html=TWO_PAGES
    )
    phone = width < 600
    context = browser.new_context(
        viewport={"width": width, "height": 800},
        device_scale_factor=2 if phone else 1,
        is_mobile=phone,
        has_touch=phone,
    )
    try:
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.goto(f"{live_server}/sign/{r.token}")
        images = page.locator(".doc-page img")
        assert images.count() == 2 and page.locator("iframe").count() == 0
        column = page.locator(".card.document").bounding_box()
        images.first.evaluate(f"(img) => new Promise(done => ({LOADED})(img) ? done() : img.onload = done)")
        page.screenshot(path=str(ARTIFACTS / f"signing-pages-{width}.png"), full_page=False)
        for number in range(2):
            images.nth(number).scroll_into_view_if_needed()
            images.nth(number).evaluate(f"(img) => new Promise(done => ({LOADED})(img) ? done() : img.onload = done)")
            assert images.nth(number).evaluate(LOADED), f"page {number + 1} shows"
            assert images.nth(number).get_attribute("alt") == f"Page {number + 1} of 2"
            box = images.nth(number).bounding_box()
            # The page takes the document column's whole width (a phone: the screen's, edge to edge).
            assert box["width"] >= (column["width"] if phone else column["width"] - 2 * 24) - 3, (box, column)
            assert box["height"] > box["width"] * 1.4  # A4, not squeezed
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "no sideways scrolling"
        # The recipient's name is on the page, in the text of page 1 served beside its image, at reading size.
        page.click("text=Read the text in large print")
        first = page.locator(".doc-text-page").first
        assert "Работник: Ольга Смирнова." in first.inner_text() and first.is_visible()
        assert float(first.evaluate("(el) => getComputedStyle(el.querySelector('p')).fontSize")[:-2]) >= 16
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"signing-pages-text-{width}.png"), full_page=False)
        assert problems == []
    finally:
        context.close()


@pytest.mark.slow(seconds=10)
def test_a_phone_signs_with_a_finger(app, users, live_server, browser, run_jobs):
    r = make_sent_request(now=utcnow() - timedelta(minutes=1), owner=users["staff"])
    context = browser.new_context(
        viewport={"width": 360, "height": 740}, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    try:
        page = context.new_page()
        page.goto(f"{live_server}/sign/{r.token}")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "no sideways scrolling"
        page.wait_for_selector("#pad-box", state="visible")
        cdp = context.new_cdp_session(page)
        for _ in range(3):  # as in draw(): a finger whose stroke left no ink draws again
            page.locator("#signature-pad").scroll_into_view_if_needed()
            box = page.locator("#signature-pad").bounding_box()
            x, y = box["x"] + 15, box["y"] + box["height"] / 2
            cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
            for i in range(1, 25):
                cdp.send(
                    "Input.dispatchTouchEvent",
                    {"type": "touchMove", "touchPoints": [{"x": x + i * 10, "y": y + (15 if i % 2 else -15)}]},
                )
            cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
            if page.evaluate(INKED, "#signature-pad"):
                break
        agree(page)
        page.click("#sign-button")
        page.wait_for_selector("text=You signed this document")
    finally:
        context.close()
    assert fresh(r.id).signature_image, "the finger drawing arrived"


def test_without_javascript_the_page_reads_and_signs_with_the_typed_name(app, users, live_server, browser):
    r = make_sent_request(now=utcnow() - timedelta(minutes=1), owner=users["staff"])
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{live_server}/sign/{r.token}")
        assert not page.locator("#pad-box").is_visible()
        assert page.locator("text=Employment contract").count() >= 1
        agree(page)
        page.click("#sign-button")
        page.wait_for_selector("text=You signed this document")
    finally:
        context.close()
    row = fresh(r.id)
    assert row.status == "signed" and row.signature_image is None


def test_a_double_click_on_sign_signs_once(app, users, live_server, watched):
    r = make_sent_request(now=utcnow() - timedelta(minutes=1), owner=users["staff"])
    watched.goto(f"{live_server}/sign/{r.token}")
    agree(watched)
    watched.dblclick("#sign-button")
    watched.wait_for_selector("text=You signed this document")
    events = db.session.scalars(select(Event).where(Event.request_id == r.id, Event.type == "status.signed")).all()
    assert len(events) == 1 and watched.problems == []


def test_a_recipient_declines_with_a_reason(app, users, live_server, watched):
    r = make_sent_request(now=utcnow() - timedelta(minutes=1), owner=users["staff"])
    watched.goto(f"{live_server}/sign/{r.token}")
    watched.click("text=I do not want to sign")
    watched.fill("textarea[name=reason]", "The start date is wrong")
    watched.click("button:has-text('Decline')")
    watched.wait_for_selector("text=You declined to sign this document")
    assert fresh(r.id).decline_reason == "The start date is wrong"


def test_each_dead_link_explains_itself(app, users, live_server, page):
    now = utcnow()
    expired = make_sent_request(
        now=now - timedelta(days=9), owner=users["staff"], email="e@example.com", reply_to="hr@example.com"
    )
    declined = make_sent_request(now=now, owner=users["staff"], email="d@example.com")
    cancelled = make_sent_request(now=now, owner=users["staff"], email="c@example.com")
    decline(db.session, request_id=declined.id, now=now, reason="no", ip=None, user_agent=None)
    cancel_requests(
        db.session, request_ids=[cancelled.id], user=users["staff"], now=now, reason="A new contract follows"
    )
    db.session.commit()
    cases = [
        ("A" * 43, 404, "This link is not valid"),
        (expired.token, 410, "This link has expired"),
        (declined.token, 200, "You declined to sign this document"),
        (cancelled.token, 410, "This request was withdrawn"),
    ]
    for token, status, text in cases:
        response = page.goto(f"{live_server}/sign/{token}")
        assert response.status == status, text
        assert page.locator(f"text={text}").count() == 1, text
        assert page.locator("input[name=consent]").count() == 0
    page.goto(f"{live_server}/sign/{expired.token}")
    assert "contact hr@example.com" in page.locator(".state-expired").inner_text()
    page.goto(f"{live_server}/sign/{cancelled.token}")  # cancelled by staff: its link says so, and why
    assert "Their reason: A new contract follows" in page.locator(".state-cancelled").inner_text()
    shoot(page, "signing-cancelled")


def test_verify_rejects_a_tampered_pdf_in_the_browser(app, users, live_server, page, run_jobs):
    from bulksign.documents.storage import get_storage
    from tests.support.sealed import signed_document, signed_request

    r = signed_request(owner=users["staff"], image=False)
    run_jobs("pdf")
    data = bytearray(get_storage().get(signed_document(r.id).storage_key))
    data[data.index(b"/Producer") + 12] ^= 0x01
    page.goto(f"{live_server}/verify")
    page.set_input_files(
        "input[name=file]", files=[{"name": "contract.pdf", "mimeType": "application/pdf", "buffer": bytes(data)}]
    )
    page.click("button:has-text('Verify')")
    page.wait_for_selector("#verdict")
    assert "Rejected: this file was changed" in page.locator("#verdict").inner_text()
