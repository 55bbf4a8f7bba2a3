"""Staff give a fillable PDF's own form fields to the parties on its placement page, in a real Chromium and with
selects only: the employee's salary, the employer's position and the employer's signature field. Then each party
signs through their mail: each signing page asks for that party's field only, and the sealed PDF prints both values
in the form's own boxes. Screenshots at 1366 and 360 px."""

from __future__ import annotations

import re
import subprocess

import pytest

from bulksign.core.extensions import db
from bulksign.models import SigningRequest
from tests.browser.test_browser_two_party_signing import LINK, _sign_as
from tests.doc_templates.test_pdf_form_fields import form_pdf
from tests.signing.test_routing import _mails_to
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at
from tests.support.signing_page import signed_bytes

pytestmark = pytest.mark.browser

EMPLOYER = {"key": "employer", "source": "fixed", "name": "Anna Boss", "email": "hr@acme.example"}


def _batch(users, template_id: int) -> int:
    """One request on the template's newest version for Eva, the employer the template's fixed party."""
    from bulksign.doc_templates.versions import get_version
    from bulksign.models import utcnow
    from tests.support.batches import batch_from_file, request_ids

    version = get_version(db.session, template_id=template_id)
    rows = "email,name,Employee name,Contract No,Office\neva@example.com,Eva Employee,Eva Employee,C-17,Riga\n"
    batch = batch_from_file(user=users["staff"], version=version, rows=rows, now=utcnow())
    (request_id,) = request_ids(batch.id)
    return request_id


def test_staff_give_the_forms_fields_to_both_parties_and_each_fills_their_own(users, live_server, page, smtp, run_jobs):
    from bulksign.doc_templates.versions import create_template, save_parties
    from bulksign.models import utcnow
    from bulksign.work.pipeline import enqueue_renders

    saved = create_template(
        db.session, name="Agreement (PDF form)", html="", kind="pdf", file=form_pdf(), user=users["staff"], now=utcnow()
    )
    save_parties(
        db.session,
        template=saved.template,
        parties=[{"key": "recipient"}, EMPLOYER],
        routing=None,
        user=users["staff"],
        now=utcnow(),
    )
    db.session.commit()
    template_id = saved.template.id

    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/{template_id}/place")
    page.wait_for_function("() => [...document.querySelectorAll('.pdf-page img')].every(i => i.naturalWidth > 0)")
    row = {n: page.locator(f".form-field-row[data-name='{n}']") for n in ("Position", "Salary", "Employer signature")}
    assert row["Position"].locator("[data-for=field]").is_hidden()
    # By keyboard: focus the select and choose with the arrow keys' values, as select_option does.
    row["Position"].locator("[data-role=use]").select_option("field:employer")
    assert row["Position"].locator("[data-for=field]").is_visible()
    row["Salary"].locator("[data-role=use]").select_option("field:recipient")
    row["Salary"].locator("select[name$=-type]").select_option("number")
    row["Employer signature"].locator("[data-role=use]").select_option("signature:employer")
    outline = page.locator(".pdf-field.is-assigned", has_text="Position")
    assert outline.inner_text() == "Position · Employer"
    assert page.locator(".pdf-field.is-assigned").count() == 3
    found = look_at(page, live_server, "pdf-form-fields-place")
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("text=Save as a new version")
    page.wait_for_url(re.compile(r".*/templates/\d+$"))

    request_id = _batch(users, template_id)
    enqueue_renders([request_id])
    run_jobs("pdf", "mail")

    (invitation,) = _mails_to(smtp, "eva@example.com")
    page.goto(re.search(LINK, invitation.text()).group(0))
    assert page.locator("#field-salary").count() == 1 and page.locator("#field-position").count() == 0
    page.fill("#field-salary", "4200")
    _sign_as(page, live_server, "Eva Employee", "pdf-form-fields-employee")
    page.wait_for_selector("text=The other parties sign it now")

    run_jobs("pdf", "mail")
    (employer_mail,) = _mails_to(smtp, "hr@acme.example")
    page.goto(re.search(LINK, employer_mail.text()).group(0))
    assert page.locator("#field-position").count() == 1 and page.locator("#field-salary").count() == 0
    page.fill("#field-position", "Welder")
    _sign_as(page, live_server, "Anna Boss", "pdf-form-fields-employer")
    page.wait_for_selector("text=You signed this document")
    assert db.session.get(SigningRequest, request_id).status == "signed"

    run_jobs("pdf", "mail")
    page.reload()
    signed = signed_bytes(page)
    # Each value inside its form field's box on page 1 (the form's boxes: y 660 and 620 up from the foot of A4).
    for value, y in (("Welder", 660), ("4,200", 620)):
        inside = subprocess.run(
            ["pdftotext", "-f", "1", "-l", "1", "-x", "200", "-y", str(round(841.89 - y - 20)), "-W", "250", "-H",
             "20", "-", "-"],
            input=signed, capture_output=True, check=True,
        ).stdout.decode()  # fmt: skip
        assert inside.split() == [value], (value, inside)
