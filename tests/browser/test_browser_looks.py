"""Every page of the staff and recipient journey in Chromium: screenshots at 1366 and 360 px, no serious or
critical accessibility problem (axe-core: contrast, names, keyboard), usable with the keyboard alone."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import SigningRequest, utcnow
from tests.support import batchdata
from tests.support.accounts import ADMIN, STAFF
from tests.support.looks import look_at
from tests.support.signing_requests import make_sent_request

pytestmark = pytest.mark.browser

CSV = b"email,name,position\r\nanna@example.com,Anna Petrova,Accountant\r\nbad-address,John Smith,Engineer\r\n"
TEMPLATE = """<!doctype html><html><head><meta charset="utf-8"><style>h1 { color: #234; }</style></head><body>
<h1>Employment contract</h1>
<p>Dear {{ name }}, you are hired as <b>{{ position }}</b>.</p>
<p style="margin-top:2em">Signed in <a href="https://example.com/{{ position }}">the office</a>.</p>
</body></html>"""


def _log_in(page, base, who):
    page.goto(f"{base}/auth/login")
    # With the keyboard alone: the email field has focus, Tab goes to the password, Enter sends the form.
    page.wait_for_selector("input[name=email]:focus")
    page.keyboard.type(who[0])
    page.keyboard.press("Tab")
    page.keyboard.type(who[1])
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/")


@pytest.fixture
def journey(app, users):
    """A template, a 67-recipient batch with problems, and one recipient's live signing link."""
    now = utcnow()
    staff = users["staff"]
    saved = create_template(db.session, name="Employment contract", html=TEMPLATE, user=staff, now=now)
    db.session.commit()
    batch = batchdata.batch_in_states(
        db.session,
        statuses=["sent"] * 50
        + ["opened"] * 6
        + ["signed"] * 5
        + ["declined", "failed"]
        + ["bounced"] * 2
        + ["pending"] * 2,
        now=now,
        name="Offer letters, December",
        user_id=staff.id,
    )
    long_one = db.session.scalar(
        select(SigningRequest).where(SigningRequest.batch_id == batch.id, SigningRequest.status == "bounced")
    )
    long_one.email = "a.very.long.mailbox.name.that.goes.on.and.on@subdivision.department.example-corporation.org"
    db.session.commit()
    sent = make_sent_request(now=now, owner=staff, expires_in=timedelta(days=5))
    return {"template_id": saved.template.id, "batch_id": batch.id, "long_id": long_one.id, "token": sent.token}


@pytest.mark.slow
def test_every_page_of_the_journey_is_accessible_and_fits_a_desktop_and_a_phone(live_server, page, journey):
    base = live_server
    problems: dict[str, dict] = {}

    def check(name):
        found = {w: v for w, v in look_at(page, base, name).items() if v}
        if found:
            problems[name] = found

    page.goto(f"{base}/auth/login")
    check("login")
    _log_in(page, base, STAFF)
    # The first Tab reaches "Skip to content", which moves focus into the page's main part.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    check("dashboard-home")

    page.goto(f"{base}/batches")
    check("batches-list")
    page.goto(f"{base}/batches/{journey['batch_id']}")
    check("batch-detail")
    # The recipient panel beside the table: a long address wraps inside it, the history is all reachable.
    page.goto(f"{base}/batches/{journey['batch_id']}?status=bounced")
    page.locator(f"#r{journey['long_id']} a.open-timeline").focus()  # with the keyboard: focus, then Enter
    page.keyboard.press("Enter")
    page.wait_for_selector("#panel .timeline")
    check("batch-detail-panel")
    page.set_viewport_size({"width": 1366, "height": 900})
    panel, table = page.locator("#panel").bounding_box(), page.locator("table.recipients").bounding_box()
    assert table["x"] + table["width"] <= panel["x"] + 1, "the panel covers the table"
    assert page.evaluate("() => { const p = document.getElementById('panel'); return p.scrollWidth <= p.clientWidth; }")
    # A long history scrolls inside the panel, which never grows past the window.
    assert page.evaluate("getComputedStyle(document.getElementById('panel')).overflowY") == "auto"
    assert page.locator("#panel").bounding_box()["height"] <= 900
    # A time beside the panel is never broken inside its day or its hour: at most the hour goes under the day.
    days = page.eval_on_selector_all(
        "table.recipients tbody td:nth-child(6) .day", "els => els.map(e => getComputedStyle(e).whiteSpace)"
    )
    assert days and set(days) == {"nowrap"}, days

    page.goto(f"{base}/batches/new?template_id={journey['template_id']}")
    check("upload")
    page.set_input_files("input[name=file]", files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": CSV}])
    page.click("text=Check the file")
    page.locator("#errors tbody tr").first.wait_for()
    check("upload-preview")

    page.goto(f"{base}/templates")
    check("templates-list")
    page.goto(f"{base}/templates/{journey['template_id']}")
    check("template-detail")
    page.goto(f"{base}/templates/{journey['template_id']}/edit")
    page.fill("#html-source", "<h1>Offer</h1>\n<p>{{ I agree }} to the terms</p>")
    page.click("main button[type=submit]")
    page.wait_for_selector("#template-error")
    check("template-error")
    page.fill("#html-source", TEMPLATE)
    page.click("#tab-rich")
    page.wait_for_selector("#rich-editor .ph")
    check("template-rich-editor")

    page.context.clear_cookies()
    _log_in(page, base, ADMIN)
    page.goto(f"{base}/admin/")
    check("admin-users")
    page.goto(f"{base}/admin/mailbox")
    check("admin-mailbox")
    page.goto(f"{base}/admin/webhooks")
    check("admin-webhooks")
    page.goto(f"{base}/admin/suppressions/")
    check("admin-suppressions")

    page.context.clear_cookies()
    page.goto(f"{base}/sign/{journey['token']}")
    page.wait_for_selector("#sign-form")
    check("signing")
    page.goto(f"{base}/verify")
    check("verify")

    assert problems == {}, json.dumps(problems, indent=1, ensure_ascii=False)


def test_the_rich_editor_keeps_placeholders_attributes_and_the_head_as_written(live_server, page, journey):
    _log_in(page, live_server, STAFF)
    page.goto(f"{live_server}/templates/{journey['template_id']}/edit")
    page.fill("#html-source", TEMPLATE)
    page.click("#tab-rich")
    page.wait_for_selector("#rich-editor .ph")
    assert page.locator("#rich-editor .ph").all_inner_texts() == ["{{ name }}", "{{ position }}"]
    page.locator("#rich-editor .pell-content p").first.click()
    page.keyboard.press("End")
    page.keyboard.type(" Welcome!")
    source = page.input_value("#html-source")
    assert source.startswith('<!doctype html><html><head><meta charset="utf-8"><style>h1 { color: #234; }</style>')
    assert "Welcome!</p>" in source and "Dear {{ name }}, you are hired as <b>{{ position }}</b>" in source
    assert 'href="https://example.com/{{ position }}"' in source and source.rstrip().endswith("</body></html>")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server}/templates/{journey['template_id']}")
    assert "Version 2" in page.locator("main").inner_text()

    # {% for %} between table rows would be moved by the browser: the rich view refuses instead of changing it.
    page.goto(f"{live_server}/templates/{journey['template_id']}/edit")
    looped = "<table>{% for r in rows %}<tr><td>{{ r }}</td></tr>{% endfor %}</table>"
    page.fill("#html-source", looped)
    page.click("#tab-rich")
    assert page.locator("#rich-refused").is_visible()
    assert page.locator("#rich-editor .pell-content").get_attribute("contenteditable") == "false"
    page.click("#tab-source")
    assert page.input_value("#html-source") == looped


def test_the_html_invitation_reads_well_on_a_desktop_and_a_phone(live_server, page):
    from bulksign.signing.invitations import html_body

    text = (
        'Hello Anna,\n\nAcme HR asks you to sign "Offer letter".\nOpen the document and sign it here:\n'
        f"{live_server}/sign/abc\n\nThe link is personal: please do not forward it."
    )
    html = html_body(text, link=f"{live_server}/sign/abc", pixel=f"{live_server}/t/1.x.gif", language="en")
    page.goto(f"{live_server}/auth/login")  # an origin for axe's script
    page.set_content(html)
    found = {w: v for w, v in look_at(page, live_server, "mail-invitation").items() if v}
    assert found == {}, json.dumps(found, indent=1)


def test_the_russian_interface_fits_a_phone_and_passes_the_same_check(live_server, page, journey):
    _log_in(page, live_server, STAFF)
    # The choice submits itself; "load" alone may still see the English page before the navigation starts.
    with page.expect_navigation():
        page.select_option("select[name=language]", "ru")
    assert page.locator("html").get_attribute("lang") == "ru"
    problems = {}
    for name, path in [
        ("ru-dashboard-home", "/"),
        ("ru-batch-detail", f"/batches/{journey['batch_id']}"),
        ("ru-template-form", f"/templates/{journey['template_id']}/edit"),
    ]:
        page.goto(live_server + path)
        found = {w: v for w, v in look_at(page, live_server, name).items() if v}
        if found:
            problems[name] = found
    assert problems == {}, json.dumps(problems, indent=1, ensure_ascii=False)
    # The panel's Close button gives focus back to the row it was opened from.
    page.goto(f"{live_server}/batches/{journey['batch_id']}")
    page.locator("a.open-timeline").first.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#panel-close")
    page.focus("#panel-close")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.classList.contains('open-timeline')")
