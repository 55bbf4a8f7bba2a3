"""A clerk builds a two-party employment contract in each kind of template (HTML in the rich-text editor, a Word
file made of the palette's tags, a plain PDF with boxes drawn on its page) with clicks, drags and an ordinary .docx:
the employee attaches a file and, only on a row with children, gives an allowance account; the employer gives a
position; each signs in their own place. Sent for two rows, each party reads their own label and only their own
fields, and the sealed PDF's certificate names both parties by label. Screenshots and axe at 1366 and 360 px."""

from __future__ import annotations

import io
import re

import pytest
from docx import Document
from playwright.sync_api import expect
from pypdf import PdfReader

from tests.browser.test_browser_pdf_templates import _draw
from tests.browser.test_browser_two_party_signing import LINK, _sign_as
from tests.signing.test_field_entry import a_png
from tests.signing.test_routing import _mails_to
from tests.support import docx_files
from tests.support.accounts import STAFF
from tests.support.looks import BATCH_PAGE, log_in, look_at
from tests.support.party_editor import name_party, open_editor
from tests.support.pdf_files import plain_pdf
from tests.support.signing_page import signed_bytes

pytestmark = pytest.mark.browser

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

#: Two rows: Ann has children (the allowance account is asked of her), Bob has none; each has an employer of their own.
ROWS = (
    b"email,name,children,employer_name,employer_email\n"
    b"ann@example.com,Ann Parent,2,Anna Boss,anna.boss@acme.example\n"
    b"bob@example.com,Bob Single,0,Otto Boss,otto.boss@acme.example\n"
)


def _desktop(page) -> None:
    page.set_viewport_size({"width": 1366, "height": 900})


def _looks_right(page, live_server, name: str) -> None:
    found = look_at(page, live_server, f"build-contract-{name}")
    assert found == {1366: [], 360: []}, found
    _desktop(page)


def _saved(page, version: int) -> None:
    page.wait_for_selector(f"text=Saved as version {version}")


# --- HTML: the rich-text editor's palette --------------------------------------------------------------------------


def _type(page, text: str) -> None:
    page.locator("#rich-editor .pell-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)


def _palette_field(page, party: str, kind: str, name: str) -> None:
    page.select_option("#palette-party", label=party)
    page.once("dialog", lambda dialog: dialog.accept(name))
    page.click(f"#palette button[data-field-type={kind}]")


def _build_html(page, live_server) -> None:
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Employment contract")
    page.click("#tab-rich")
    _type(page, "Between ACME Ltd and ")
    page.click("#palette button[data-token='{{ name }}']")
    _type(page, ", who has children: ")
    page.once("dialog", lambda dialog: dialog.accept("children"))
    page.click("#rich-editor button[title='Insert a placeholder']")
    _type(page, ". Last payslip: ")
    _palette_field(page, "Recipient", "attachment", "payslip")
    _type(page, ". Allowance paid to: ")
    _palette_field(page, "Recipient", "text", "allowance")
    _type(page, ". The employee: ")
    page.click("#palette button[data-token='{{ signature }}']")
    page.click("main button[type=submit]")
    _saved(page, 1)
    _parties(page, version=2)
    open_editor(page)
    page.click("#tab-rich")
    _type(page, " Position: ")
    _palette_field(page, "Employer", "text", "position")
    _type(page, ". For the employer: ")
    page.click("#palette button[data-token='{{ signature_employer }}']")
    expect(page.locator("#rich-editor span.ph")).to_have_count(7)
    _looks_right(page, live_server, "html-editor")
    page.click("main button[type=submit]")
    _saved(page, 3)


# --- Word: a .docx of the palette's tags, checked before it is saved ------------------------------------------------


def _copied(page, tag: str) -> str:
    """Copy a tag from the Word palette as a clerk would, and give what they pasted."""
    button = page.locator(f"#word-palette button[data-copy='{tag}']")
    button.click()
    expect(button).to_have_text("Copied")
    return button.get_attribute("data-copy")


def _docx(*paragraphs: str) -> dict:
    document = Document()
    document.add_heading("Employment contract", level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    return {"name": "contract.docx", "mimeType": DOCX_TYPE, "buffer": docx_files.save(document)}


def _build_word(page, live_server, run_jobs) -> None:
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Employment contract")
    page.check("input[name=kind][value=docx]")
    name, signature = _copied(page, "{{ name }}"), _copied(page, "{{ signature }}")
    first = _docx(
        f"Between ACME Ltd and {name}, who has children: {{{{ children }}}}.",
        "Last payslip: {{ field_payslip }}. Allowance paid to: {{ field_allowance }}.",
        f"The employee: {signature}",
    )
    page.set_input_files("input[name=file]", files=[first])
    page.click("main button[type=submit]")
    _saved(page, 1)
    _parties(page, version=2)
    # The employer's tag, copied from the template's palette, goes in the file with a field of theirs; checked first.
    employer = _copied(page, "{{ signature_employer }}")
    second = _docx(
        f"Between ACME Ltd and {name}, who has children: {{{{ children }}}}.",
        "Last payslip: {{ field_payslip }}. Allowance paid to: {{ field_allowance }}.",
        f"The employee: {signature}",
        f"Position: {{{{ field_position }}}}. For the employer: {employer}",
    )
    page.click("#word-check")
    page.set_input_files("input[name=file]", files=[second])
    page.click("#word-check-form button[type=submit]")
    expect(page.locator("#word-check-running")).to_be_visible()
    run_jobs("pdf")
    expect(page.locator("#word-check-found")).to_be_visible(timeout=10_000)
    expect(page.locator("#word-check-all-understood")).to_be_visible()
    for tag in ("signature", "signature_employer", "field_payslip", "field_allowance", "field_position"):
        expect(page.locator(f".check-box[data-tag={tag}]")).to_have_count(1)
    page.locator("#word-check-pages img").first.evaluate("img => img.decode()")
    _looks_right(page, live_server, "word-check")
    page.click("text=Save a new version")
    page.set_input_files("input[name=file]", files=[second])
    page.click("main button[type=submit]")
    _saved(page, 3)
    _field_settings(page, {"payslip": ("attachment", "Employee"), "position": ("text", "Employer")})


# --- PDF: boxes drawn on the page ----------------------------------------------------------------------------------


def _box(page, figure, corners, name: str) -> None:
    _draw(page, figure, *corners)
    page.locator(".box-row [data-role=name]").last.fill(name)


def _build_pdf(page, live_server) -> None:
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Employment contract")
    pdf = {"name": "contract.pdf", "mimeType": "application/pdf", "buffer": plain_pdf(text="Employment contract")}
    page.set_input_files("input[name=file]", files=[pdf])
    page.click("main button[type=submit]")
    _saved(page, 1)
    page.click("#place-fields")
    page.wait_for_url("**/place")
    figure = page.locator(".pdf-page").first
    page.wait_for_function("() => document.querySelector('.pdf-page img').naturalWidth > 0")
    _box(page, figure, ((0.10, 0.20), (0.50, 0.23)), "name")
    _box(page, figure, ((0.55, 0.20), (0.90, 0.23)), "children")
    _box(page, figure, ((0.10, 0.30), (0.50, 0.33)), "field_payslip")
    _box(page, figure, ((0.55, 0.30), (0.90, 0.33)), "field_allowance")
    _box(page, figure, ((0.10, 0.40), (0.50, 0.43)), "field_position")
    _box(page, figure, ((0.10, 0.70), (0.45, 0.82)), "signature")
    _box(page, figure, ((0.55, 0.70), (0.90, 0.82)), "signature_employer")
    # Both parties' signature places are marked as signatures.
    expect(page.locator(".pdf-box.is-signature")).to_have_count(2)
    _looks_right(page, live_server, "pdf-boxes")
    page.click("text=Save as a new version")
    _saved(page, 2)
    _parties(page, version=3)
    _field_settings(page, {"payslip": ("attachment", "Employee"), "position": ("text", "Employer")})


# --- Shared steps: the parties, the fields' settings, the batch, the signing ---------------------------------------


def _parties(page, *, version: int) -> None:
    """The employee and the employer, named; the employer a person per row (the file's employer_* columns)."""
    employer = page.locator(".party-def[data-key=employer]")
    if not employer.count():
        page.click("#add-party")
        expect(page.locator(".party-def")).to_have_count(2)
        employer = page.locator(".party-def").last
        employer.locator("[name=party-key]").fill("employer")
    name_party(employer, labels=("Employer", "Работодатель"))
    employer.locator("[name=party-source]").select_option("columns")
    name_party(page.locator(".party-def[data-key=recipient]"), labels=("Employee", "Работник"))
    page.click("#save-parties")
    _saved(page, version)


def _field_settings(page, types: dict[str, tuple[str, str]]) -> None:
    for name, (kind, party) in types.items():
        page.select_option(f"select[name={name}-type]", kind)
        page.select_option(f"select[name={name}-role]", label=party)


def _condition_and_send(page, live_server, kind: str, *, version: int) -> None:
    """The allowance account asked for only when the row's children is above 0; saved, then sent for two rows."""
    page.fill("input[name=allowance-label]", "Allowance account")
    page.select_option("select[name=allowance-when-source]", "column:children")
    page.select_option("select[name=allowance-when-operator]", "greater_than")
    page.fill("input[name=allowance-when-value]", "0")
    page.click("#fields-form button[type=submit]")
    _saved(page, version)
    expect(page.locator("#roles")).to_have_text("Employee, Employer")
    expect(page.locator("#check-errors")).to_have_count(0)
    _looks_right(page, live_server, f"{kind}-template")
    page.click("text=Start a batch")
    page.wait_for_url("**/batches/new?template_id=*")
    expect(page.locator("#steps .step:not(.step-new) .chip-label")).to_have_text(["Employee", "Employer"])
    page.set_input_files("input[name=file]", files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": ROWS}])
    page.click("text=Check the file")
    page.click("#create-batch")
    page.wait_for_url(BATCH_PAGE)


def _open(page, smtp, address: str) -> str:
    (invitation,) = _mails_to(smtp, address)
    link = re.search(LINK, invitation.text()).group(0)
    _desktop(page)
    page.goto(link)
    return link


def _fields_shown(page) -> list[str]:
    return page.locator(".field-list input, .field-list select").evaluate_all("es => es.map(e => e.id)")


def _sign_both_rows(page, live_server, smtp, run_jobs, kind: str) -> str:
    """Each party signs from their mail; returns the link of Ann's employer, whose sealed copy ends it."""
    run_jobs("pdf", "mail")
    _open(page, smtp, "ann@example.com")
    expect(page.locator("main")).to_contain_text("signs as Employee")
    assert _fields_shown(page) == ["field-payslip", "field-allowance"]
    page.set_input_files("#field-payslip", files=[{"name": "payslip.png", "mimeType": "image/png", "buffer": a_png()}])
    page.fill("#field-allowance", "DE89 3704 0044 0532")
    _sign_as(page, live_server, "Ann Parent", f"build-contract-{kind}-employee")
    page.wait_for_selector("text=The other parties sign it now")

    # Bob has no children: no allowance account is asked of him.
    _open(page, smtp, "bob@example.com")
    expect(page.locator("main")).to_contain_text("signs as Employee")
    assert _fields_shown(page) == ["field-payslip"]
    page.set_input_files("#field-payslip", files=[{"name": "payslip.png", "mimeType": "image/png", "buffer": a_png()}])
    _sign_as(page, live_server, "Bob Single", f"build-contract-{kind}-employee-no-children")
    page.wait_for_selector("text=The other parties sign it now")

    run_jobs("pdf", "mail")
    boss = _open(page, smtp, "anna.boss@acme.example")
    expect(page.locator("main")).to_contain_text("signs as Employer")
    assert _fields_shown(page) == ["field-position"]
    page.fill("#field-position", "Senior accountant")
    _sign_as(page, live_server, "Anna Boss", f"build-contract-{kind}-employer")
    page.wait_for_selector("text=You signed this document")
    run_jobs("pdf", "mail")
    return boss


def _certificate(page, link: str) -> str:
    _desktop(page)
    page.goto(link)
    text = " ".join(" ".join(p.extract_text().split()) for p in PdfReader(io.BytesIO(signed_bytes(page))).pages)
    return text[text.index("Audit certificate") :]


@pytest.mark.slow(seconds=90)
@pytest.mark.parametrize("kind", ["html", "word", "pdf"])
def test_a_clerk_builds_a_two_party_contract_and_both_parties_sign_it(kind, users, live_server, page, smtp, run_jobs):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    log_in(page, live_server, *STAFF)
    _desktop(page)
    if kind == "html":
        _build_html(page, live_server)
    elif kind == "word":
        _build_word(page, live_server, run_jobs)
    else:
        _build_pdf(page, live_server)
    _condition_and_send(page, live_server, kind, version=4)
    boss = _sign_both_rows(page, live_server, smtp, run_jobs, kind)
    certificate = _certificate(page, boss)
    assert "Employee: Ann Parent <ann@example.com>" in certificate, certificate
    assert "Employer: Anna Boss <anna.boss@acme.example>" in certificate, certificate
    assert "Allowance account" in certificate and "Senior accountant" in certificate, certificate
    assert "recipient" not in certificate and "employer" not in certificate, certificate
    assert problems == []
