"""A clerk builds a two-party contract in the rich-text editor with clicks only: the palette inserts the row's
values, a field for a party and each party's signature at the cursor as chips coloured by party, and the source tab
shows what they became; sent, the employee and the employer each read their own label and the sealed PDF's
certificate names both by label. Screenshots and axe at 1366 and 360 px."""

from __future__ import annotations

import io
import re

import pytest
from playwright.sync_api import expect
from pypdf import PdfReader

from bulksign.core.extensions import db
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.template_check import check_template
from bulksign.doc_templates.versions import get_version
from bulksign.models import DocumentTemplate
from tests.browser.test_browser_two_party_signing import LINK, _sign_as
from tests.signing.test_routing import _mails_to
from tests.support.accounts import STAFF
from tests.support.looks import BATCH_PAGE, log_in, look_at
from tests.support.party_editor import name_party, open_editor
from tests.support.signing_page import signed_bytes

pytestmark = pytest.mark.browser


def _type(page, text: str) -> None:
    page.locator("#rich-editor .pell-content").click()
    page.keyboard.press("End")
    page.keyboard.type(text)


def _field(page, party: str, kind: str, name: str) -> None:
    page.select_option("#palette-party", label=party)
    page.once("dialog", lambda dialog: dialog.accept(name))
    page.click(f"#palette button[data-field-type={kind}]")


def _sign_from_mail(page, live_server, smtp, address: str, party: tuple[str, str, str], name: str) -> None:
    """Open the invitation to ``address``, see who they sign as, fill their field and sign (``party``: the label,
    the field's selector and its value)."""
    label, field, value = party
    (invitation,) = _mails_to(smtp, address)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(re.search(LINK, invitation.text()).group(0))
    expect(page.locator("main")).to_contain_text(f"signs as {label}")
    page.fill(field, value)
    _sign_as(page, live_server, name, f"palette-contract-{label.lower()}")


@pytest.mark.slow(seconds=20)
def test_a_clerk_builds_a_two_party_contract_with_the_palette_and_sends_it(users, live_server, page, smtp, run_jobs):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Employment contract")
    page.click("#tab-rich")
    _type(page, "Employee: ")
    page.click("#palette button[data-token='{{ name }}']")
    _type(page, ". IBAN: ")
    _field(page, "Recipient", "text", "iban")
    _type(page, ". Signed: ")
    page.click("#palette button[data-token='{{ signature }}']")
    expect(page.locator("#rich-editor span.ph")).to_have_text(["{{ name }}", "{{ field_iban }}", "{{ signature }}"])
    page.click("#tab-source")
    source = re.sub(r"<[^>]+>", "", page.input_value("#html-source")).replace("&nbsp;", " ")
    assert " ".join(source.split()) == "Employee: {{ name }} . IBAN: {{ field_iban }} . Signed: {{ signature }}"
    page.click("main button[type=submit]")
    page.wait_for_selector("text=Saved as version 1")

    # The employer, named on the template page, then given a field and a signature place in the editor.
    page.click("#add-party")
    name_party(
        page.locator(".party-def").last,
        key="employer",
        labels=("Employer", "Работодатель"),
        person=("Anna Boss", "hr@acme.example"),
    )
    name_party(page.locator(".party-def[data-key=recipient]"), labels=("Employee", "Работник"))
    page.click("#save-parties")
    page.wait_for_selector("text=Saved as version 2")
    expect(page.locator("#check-warnings")).to_contain_text("Employer has no signature place in the document")
    open_editor(page)
    page.click("#tab-rich")
    _type(page, " Starts on: ")
    _field(page, "Employer", "text", "start")
    _type(page, ". For the employer: ")
    page.click("#palette button[data-token='{{ signature_employer }}']")
    chips = page.locator("#rich-editor span.ph")
    expect(chips).to_have_count(5)
    # Chips are coloured by party: the employer's field and signature in the employer's colour.
    colours = chips.evaluate_all("cs => cs.map(c => getComputedStyle(c).borderTopColor)")
    assert colours[3] == colours[4] != colours[2], colours
    found = look_at(page, live_server, "template-palette")
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("main button[type=submit]")
    page.wait_for_selector("text=Saved as version 3")
    expect(page.locator("#roles")).to_have_text("Employee, Employer")
    expect(page.locator("#template-check")).to_have_count(0)

    db.session.expire_all()
    template = db.session.query(DocumentTemplate).one()
    version = get_version(db.session, template_id=template.id)
    assert [(f.name, f.type, f.role) for f in template_fields(version)] == [
        ("iban", "text", "recipient"),
        ("start", "text", "employer"),
    ]
    assert not check_template(version, language="en")

    # Sent: a file of one row; the employer is the template's person, the order the template's.
    page.click("text=Start a batch")
    page.wait_for_url("**/batches/new?template_id=*")
    expect(page.locator("#steps .step:not(.step-new) .chip-label")).to_have_text(["Employee", "Employer"])
    csv = b"email,name\neva@example.com,Eva Employee\n"
    page.set_input_files("input[name=file]", files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": csv}])
    page.click("text=Check the file")
    page.click("#create-batch")
    page.wait_for_url(BATCH_PAGE)
    run_jobs("pdf", "mail")
    _sign_from_mail(
        page, live_server, smtp, "eva@example.com", ("Employee", "#field-iban", "DE89 3704"), "Eva Employee"
    )
    page.wait_for_selector("text=The other parties sign it now")
    run_jobs("pdf", "mail")
    _sign_from_mail(page, live_server, smtp, "hr@acme.example", ("Employer", "#field-start", "1 February"), "Anna Boss")
    page.wait_for_selector("text=You signed this document")
    run_jobs("pdf", "mail")
    page.reload()
    page.set_viewport_size({"width": 1366, "height": 900})
    text = " ".join(" ".join(p.extract_text().split()) for p in PdfReader(io.BytesIO(signed_bytes(page))).pages)
    certificate = text[text.index("Audit certificate") :]
    assert "Employee: Eva Employee <eva@example.com>" in certificate
    assert "Employer: Anna Boss <hr@acme.example>" in certificate
    assert "recipient" not in certificate and "employer" not in certificate
    assert problems == []
