"""A clerk makes a field shown only when another holds a value, with clicks and the keyboard on the template page;
sent to two people, the signer sees the field appear only as the condition holds, and the sealed PDF prints it only
then. Screenshots and axe at 1366 and 360 px."""

from __future__ import annotations

import io
import re

import pytest
from playwright.sync_api import expect
from pypdf import PdfReader

from bulksign.core.extensions import db
from bulksign.doc_templates.field_conditions import FieldCondition
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.versions import get_version
from bulksign.models import DocumentTemplate
from tests.browser.test_browser_two_party_signing import LINK, _sign_as
from tests.signing.test_routing import _mails_to
from tests.support.accounts import STAFF
from tests.support.looks import BATCH_PAGE, log_in, look_at, save_html_template
from tests.support.signing_page import signed_bytes

pytestmark = pytest.mark.browser

FAMILY = (
    "<h1>Family allowance</h1><p>Employee: {{ name }}.</p><p>Children: {{ field_children }}</p>"
    "<p>Paid to: {{ field_allowance }}</p><p>{{ signature }}</p>"
)


def _open_invitation(page, smtp, address: str) -> str:
    (invitation,) = _mails_to(smtp, address)
    link = re.search(LINK, invitation.text()).group(0)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(link)
    return link


def _signed_text(page, link: str) -> str:
    page.goto(link)
    return " ".join(" ".join(p.extract_text().split()) for p in PdfReader(io.BytesIO(signed_bytes(page))).pages)


@pytest.mark.slow(seconds=25)
def test_a_clerk_adds_a_conditional_field_and_the_signer_sees_it_only_when_it_holds(
    users, live_server, page, smtp, run_jobs
):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    save_html_template(page, live_server, name="Family allowance", html=FAMILY)

    # Children is a number; the allowance account is asked for only when there are children.
    page.select_option("select[name=children-type]", "number")
    page.fill("input[name=allowance-label]", "Allowance account")
    source = page.locator("select[name=allowance-when-source]")
    expect(source.locator("option")).to_have_text(["Always", "Children", "name"])
    source.select_option(label="Children")
    operator = page.locator("select[name=allowance-when-operator]")
    operator.focus()
    operator.select_option(label="is greater than")
    page.keyboard.press("Tab")
    page.keyboard.type("0")
    found = look_at(page, live_server, "field-condition-editing")
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("#fields-form button[type=submit]")
    page.wait_for_selector("text=Saved as version 2")
    expect(page.locator("select[name=allowance-when-source] option:checked")).to_have_text("Children")

    db.session.expire_all()
    template = db.session.query(DocumentTemplate).one()
    allowance = template_fields(get_version(db.session, template_id=template.id))[1]
    assert allowance.condition == FieldCondition(kind="field", source="children", operator="greater_than", value="0")

    page.click("text=Start a batch")
    page.wait_for_url("**/batches/new?template_id=*")
    csv = b"email,name\nann@example.com,Ann Parent\nbob@example.com,Bob Single\n"
    page.set_input_files("input[name=file]", files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": csv}])
    page.click("text=Check the file")
    page.click("#create-batch")
    page.wait_for_url(BATCH_PAGE)
    run_jobs("pdf", "mail")

    # Ann has children: the allowance account appears as she types their number, and is asked for.
    ann = _open_invitation(page, smtp, "ann@example.com")
    account = page.locator("#field-allowance")
    expect(account).to_be_hidden()
    page.fill("#field-children", "2")
    expect(account).to_be_visible()
    expect(page.locator("#field-allowance-when")).to_have_text("Only when “Children” is greater than 0.")
    account.fill("DE89 3704 0044 0532")
    _sign_as(page, live_server, "Ann Parent", "field-condition-shown")
    page.wait_for_selector("text=You signed this document")

    # Bob first says 1, types an account, then corrects to 0: the account goes away, and is not kept.
    bob = _open_invitation(page, smtp, "bob@example.com")
    page.fill("#field-children", "1")
    account.fill("NOT FOR BOB")
    page.fill("#field-children", "0")
    expect(account).to_be_hidden()
    _sign_as(page, live_server, "Bob Single", "field-condition-hidden")
    page.wait_for_selector("text=You signed this document")

    run_jobs("pdf", "mail")
    anns = _signed_text(page, ann)
    assert "DE89 3704 0044 0532" in anns and "Allowance account" in anns[anns.index("Audit certificate") :]
    bobs = _signed_text(page, bob)
    assert "NOT FOR BOB" not in bobs and "Allowance account" not in bobs, bobs
    assert problems == []
