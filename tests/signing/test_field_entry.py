"""What the signer fills in on the signing page: their role's fields, placed and numbered, checked in the
batch's language, kept across a refused try, saved with the sign and for that request only."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
import time
from datetime import timedelta

from PIL import Image
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import FieldValue, utcnow
from bulksign.signing.field_entry import NOTHING_FILLED, FilledForm, Upload, check_entries
from bulksign.signing.recipient_actions import sign
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids
from tests.support.pdf_files import plain_pdf
from tests.support.races import race
from tests.support.signing_requests import fresh, make_sent_request
from tests.support.web import csrf_from

PAGE = '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">{body}</body>'
CONTRACT = PAGE.format(
    body="<h1>Employment contract</h1><p>IBAN: {{ field_iban }}</p><p>Salary wish: {{ field_salary }}</p>"
    "<p>Start: {{ field_start }}</p><p>Rules read: {{ field_rules }}</p><p>Tax class: {{ field_tax }}</p>"
    "<p>ID: {{ field_id_scan }}</p><p>Note: {{ field_note }}</p><p>{{ signature }}</p>"
)
FIELDS = [
    {"name": "iban", "label": "IBAN", "pattern": "[A-Z]{2}[0-9]{2}[A-Z0-9 ]{8,40}"},
    {"name": "salary", "type": "number", "label": "Salary wish", "minimum": 1000, "maximum": 100000},
    {"name": "start", "type": "date", "label": "Start date", "minimum": "2027-01-01", "maximum": "2027-12-31"},
    {"name": "rules", "type": "checkbox", "label": "I have read the work rules"},
    {"name": "tax", "type": "choice", "label": "Tax class", "options": ["I", "II", "III"]},
    {"name": "id_scan", "type": "attachment", "label": "ID scan"},
    {"name": "note", "label": "Note", "required": False},
]
GOOD = {
    "field-iban": "DE89 3704 0044 0532 0130 00",
    "field-salary": "4,500.50",
    "field-start": "2027-03-01",
    "field-rules": "yes",
    "field-tax": "II",
    "field-note": "",
}


def a_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), "navy").save(out, "PNG")
    return out.getvalue()


def contract(users, **kwargs):
    return make_sent_request(
        now=utcnow() - timedelta(minutes=5), owner=users["staff"], html=CONTRACT, fields=FIELDS, **kwargs
    )


def post(client, token, values: dict, files: dict | None = None, *, csrf: str | None = None):
    csrf = csrf or csrf_from(client.get(f"/sign/{token}"))
    data = {"csrf_token": csrf, "name": "Иван Петров", "consent": "yes", **values}
    for name, (filename, content) in (files or {}).items():
        data[name] = (io.BytesIO(content), filename)
    return client.post(f"/sign/{token}/sign", data=data, content_type="multipart/form-data")


def sign_filled(request_id: int, filled: FilledForm, *, name: str = "Иван Петров", now=None) -> str:
    """Sign through the domain with ``filled`` as the form's fields (``now``: the real clock unless given); the
    outcome's status (and message)."""
    outcome = sign(
        db.session,
        request_id=request_id,
        now=now or utcnow(),
        signer_name=name,
        signature_png=None,
        consent=True,
        ip="203.0.113.5",
        user_agent="Phone/1",
        filled=filled,
    )
    return outcome.status if outcome.status != "invalid" else f"invalid: {outcome.message}"


def saved(request_id: int) -> dict[str, FieldValue]:
    db.session.expire_all()
    return {v.name: v for v in db.session.scalars(select(FieldValue).where(FieldValue.request_id == request_id))}


def field_html(html: str, name: str) -> str:
    """The page's list item of one field."""
    found = re.search(rf'<li class="field-entry[^"]*">(?:(?!</li>).)*id="field-{name}"(?:(?!</li>).)*</li>', html, re.S)
    assert found, f"no field {name} on the page"
    return found.group(0)


def test_the_page_shows_the_signers_fields_numbered_in_document_order_at_their_places(client, users):
    r = contract(users, data={"field_iban": "DE00 PREFILLED"})
    html = client.get(f"/sign/{r.token}").get_data(as_text=True)
    labels = re.findall(r'<span class="field-number">(\d+)</span> ([^<(]+)', html)
    assert [(n, label.strip()) for n, label in labels] == [
        ("1", "IBAN"), ("2", "Salary wish"), ("3", "Start date"), ("4", "I have read the work rules"),
        ("5", "Tax class"), ("6", "ID scan"), ("7", "Note"),
    ]  # fmt: skip
    # Each has a marker over its place on the page image, numbered as its input; the prefill is shown, editable.
    markers = re.findall(r'class="field-marker" href="#field-(\w+)" data-place="([\d. ]+)"', html)
    assert [m[0] for m in markers] == ["iban", "salary", "start", "rules", "tax", "id_scan", "note"]
    tops = [float(place.split()[1]) for _, place in markers]
    assert tops == sorted(tops) and all(0 < t < 100 for t in tops)
    assert 'value="DE00 PREFILLED"' in field_html(html, "iban") and "readonly" not in field_html(html, "iban")
    assert 'enctype="multipart/form-data"' in html
    # The number's and date's hints are in the batch's language (English here).
    assert "From 1,000 to 100,000." in field_html(html, "salary")
    assert "From 1 January 2027 to 31 December 2027." in field_html(html, "start")


def test_values_typed_on_the_page_are_saved_with_the_sign_for_that_request_only(client, users, app):
    r, other = contract(users), contract(users)
    scan = a_png()
    csrf = csrf_from(client.get(f"/sign/{r.token}"))
    answer = post(client, r.token, GOOD, {"field-id_scan": ("my scan.png", scan)}, csrf=csrf)
    assert answer.status_code == 303, answer.get_data(as_text=True)[:3000]
    assert fresh(r.id).status == "signed"
    values = saved(r.id)
    assert {n: v.value for n, v in values.items()} == {
        "iban": "DE89 3704 0044 0532 0130 00",
        "salary": "4500.5",
        "start": "2027-03-01",
        "rules": "true",
        "tax": "II",
        "id_scan": "my scan.png",
        "note": None,
    }
    assert {v.role for v in values.values()} == {"recipient"} and all(v.entered_ip for v in values.values())
    attachment = values["id_scan"]
    assert (attachment.content_type, attachment.size) == ("image/png", len(scan))
    assert attachment.sha256 == hashlib.sha256(scan).hexdigest()
    assert attachment.storage_key == f"batches/{r.batch_id}/requests/{r.id}/fields/id_scan.png"
    assert get_storage().get(attachment.storage_key) == scan
    assert saved(other.id) == {} and fresh(other.id).status != "signed"
    # A second try (a double click) with other values changes nothing.
    again = post(client, r.token, {**GOOD, "field-tax": "III"}, {"field-id_scan": ("other.png", a_png())}, csrf=csrf)
    assert again.status_code == 303
    assert saved(r.id)["tax"].value == "II"


def test_a_required_empty_field_and_a_bad_date_are_refused_at_their_fields_and_what_was_typed_stays(client, users):
    r = contract(users)
    typed = {**GOOD, "field-iban": "", "field-start": "2026-02-30", "field-note": "Ring twice"}
    answer = post(client, r.token, typed, {"field-id_scan": ("scan.png", a_png())})
    assert answer.status_code == 422
    html = answer.get_data(as_text=True)
    iban = field_html(html, "iban")
    assert "Fill in “IBAN”: it is required." in iban and 'aria-invalid="true"' in iban
    assert 'aria-describedby="field-iban-error"' in iban and 'id="field-iban-error"' in iban
    start = field_html(html, "start")
    assert "“2026-02-30” is not a date. Write it like 1/31/27." in start and 'value="2026-02-30"' in start
    # What was typed stays; a file must be chosen again, and the page says so.
    assert 'value="4,500.50"' in field_html(html, "salary") and 'value="Ring twice"' in field_html(html, "note")
    assert "<option selected>II</option>" in field_html(html, "tax") and "checked" in field_html(html, "rules")
    assert "You chose “scan.png”: choose it again" in field_html(html, "id_scan")
    assert "aria-invalid" not in field_html(html, "salary")
    assert saved(r.id) == {} and fresh(r.id).status == "opened"
    # Out of its range is refused too, in words.
    answer = post(client, r.token, {**GOOD, "field-start": "2028-01-05"}, {"field-id_scan": ("scan.png", a_png())})
    assert "“Start date” must be from 1 January 2027 to 31 December 2027." in answer.get_data(as_text=True)


def test_an_exe_renamed_pdf_a_broken_pdf_and_an_oversized_file_are_refused(app, client, users):
    app.config["ATTACHMENT_MAX_MB"] = 1
    r = contract(users)
    cases = {
        "setup.pdf": (b"MZ\x90\x00" + b"\x00" * 5000, "is not a PDF, JPEG or PNG (whatever its name says)."),
        "broken.pdf": (b"%PDF-1.7\n" + b"garbage" * 100, "is damaged and cannot be read. Choose another."),
        "huge.png": (a_png() + b"\x00" * (1024 * 1024), "is too big: at most 1 MB."),
    }
    for filename, (content, message) in cases.items():
        answer = post(client, r.token, GOOD, {"field-id_scan": (filename, content)})
        assert answer.status_code == 422
        assert f"The file for “ID scan” {message}" in field_html(answer.get_data(as_text=True), "id_scan")
    assert saved(r.id) == {} and fresh(r.id).status == "opened"
    # A real PDF passes, whatever its name.
    assert post(client, r.token, GOOD, {"field-id_scan": ("scan", plain_pdf())}).status_code == 303
    assert saved(r.id)["id_scan"].content_type == "application/pdf"


def test_a_read_only_prefill_is_shown_locked_and_a_changed_value_is_ignored(client, users):
    fields = [{**f, "read_only": True} if f["name"] == "iban" else f for f in FIELDS]
    r = make_sent_request(
        now=utcnow() - timedelta(minutes=5),
        owner=users["staff"],
        html=CONTRACT,
        fields=fields,
        data={"field_iban": "DE89370400440532013000"},
    )
    iban = field_html(client.get(f"/sign/{r.token}").get_data(as_text=True), "iban")
    assert 'value="DE89370400440532013000"' in iban and "readonly" in iban
    assert "Filled in by the sender; it cannot be changed." in iban
    answer = post(client, r.token, {**GOOD, "field-iban": "GB00 HACK 0000 0000"}, {"field-id_scan": ("s.png", a_png())})
    assert answer.status_code == 303
    assert saved(r.id)["iban"].value == "DE89370400440532013000"


def test_another_partys_fields_are_not_on_the_recipients_page_nor_asked_of_them(client, users):
    html = PAGE.format(
        body="<p>IBAN {{ field_iban }}</p><p>{{ signature }}</p><p>Employer's stamp no. {{ field_stamp_no }}</p>"
        "<p>{{ signature_employer }}</p>"
    )
    r = make_sent_request(
        now=utcnow() - timedelta(minutes=5),
        owner=users["staff"],
        html=html,
        fields=[{"name": "iban"}, {"name": "stamp_no", "role": "employer"}],
    )
    page = client.get(f"/sign/{r.token}").get_data(as_text=True)
    assert 'id="field-iban"' in page and "field-stamp_no" not in page
    assert post(client, r.token, {"field-iban": "DE89 0000", "field-stamp_no": "forged"}).status_code == 303
    assert {n: (v.value, v.role) for n, v in saved(r.id).items()} == {"iban": ("DE89 0000", "recipient")}


def test_numbers_and_dates_are_read_in_the_batchs_language(app, users):
    r = make_sent_request(now=utcnow(), owner=users["staff"], html=CONTRACT, fields=FIELDS, language="ru")
    request = fresh(r.id)
    typed = {"iban": "DE89370400440532013000", "salary": "1 234,5", "start": "31.01.2027", "rules": "yes", "tax": "I"}
    filled = FilledForm(
        typed=typed, files={"id_scan": Upload(filename="a.png", data=a_png())}, attachment_max_bytes=10**6, storage=None
    )
    checked = check_entries(request, role="recipient", filled=filled)
    assert not checked.errors
    assert {e.name: e.value for e in checked.entries}["salary"] == "1234.5"
    assert {e.name: e.value for e in checked.entries}["start"] == "2027-01-31"
    wrong_typed = {**typed, "salary": "12 abc", "start": "2027-02-31", "tax": "IV", "rules": ""}
    wrong = check_entries(request, role="recipient", filled=dataclasses.replace(filled, typed=wrong_typed))
    assert set(wrong.errors) == {"salary", "start", "tax", "rules"} and not wrong.entries
    assert wrong.errors["salary"].english == "“12 abc” is not a number. Write it like 1\xa0234,5."
    assert wrong.errors["start"].english == "“2027-02-31” is not a date. Write it like 31.01.2027."
    # Nothing filled: every required field is named.
    assert set(check_entries(request, role="recipient", filled=NOTHING_FILLED).errors) == {
        "iban", "salary", "start", "rules", "tax", "id_scan",
    }  # fmt: skip


def test_each_party_fills_only_its_own_roles_fields_each_saved_with_that_partys_sign(
    app, users, client, smtp, run_jobs
):
    from tests.signing.test_routing import _mails_to, _sent, _token

    html = PAGE.format(
        body="<p>Employee {{ name }}, IBAN {{ field_iban }}</p><p>{{ signature }}</p>"
        "<p>Employer's file no. {{ field_file_no }}</p><p>{{ signature_employer }}</p>"
    )
    request_id = _sent(users, run_jobs, html=html, fields=[{"name": "iban"}, {"name": "file_no", "role": "employer"}])
    employee = _token(_mails_to(smtp, "eva@example.com")[0])
    page = client.get(f"/sign/{employee}").get_data(as_text=True)
    assert 'id="field-iban"' in page and "field-file_no" not in page
    # The employer's field sent on the employee's page is not taken.
    assert post(client, employee, {"field-iban": "DE89 0000", "field-file_no": "forged"}).status_code == 303
    assert {n: (v.value, v.role) for n, v in saved(request_id).items()} == {"iban": ("DE89 0000", "recipient")}

    run_jobs("pdf", "mail")  # the next step invites the employer
    employer = _token(_mails_to(smtp, "hr@acme.example")[0])
    page = client.get(f"/sign/{employer}").get_data(as_text=True)
    assert 'id="field-file_no"' in page and "field-iban" not in page
    refused = post(client, employer, {"field-file_no": ""})
    assert refused.status_code == 422 and "Fill in “File no”: it is required." in refused.get_data(as_text=True)
    assert post(client, employer, {"field-file_no": "HR-2027/14", "field-iban": "changed"}).status_code == 303
    assert fresh(request_id).status == "signed"
    assert {n: (v.value, v.role) for n, v in saved(request_id).items()} == {
        "iban": ("DE89 0000", "recipient"),
        "file_no": ("HR-2027/14", "employer"),
    }


def test_a_russian_batchs_page_reads_its_numbers_and_dates(client, users):
    r = contract(users, language="ru")
    html = client.get(f"/sign/{r.token}").get_data(as_text=True)
    assert "1\xa0000" in field_html(html, "salary") and "2027" in field_html(html, "start")
    typed = {**GOOD, "field-salary": "1 234,5", "field-start": "31.01.2027"}
    assert post(client, r.token, typed, {"field-id_scan": ("скан.png", a_png())}).status_code == 303
    values = saved(r.id)
    assert (values["salary"].value, values["start"].value, values["id_scan"].value) == (
        "1234.5",
        "2027-01-31",
        "скан.png",
    )


def test_of_four_racing_signs_only_the_winners_values_and_file_are_saved(app, users):
    r = contract(users)
    scans = {n: a_png() + bytes([n]) * 10 for n in range(4)}  # four different files (a PNG's trailing bytes)

    def attempt(n):
        filled = FilledForm(
            typed={**{k.removeprefix("field-"): v for k, v in GOOD.items()}, "note": f"try {n}"},
            files={"id_scan": Upload(filename=f"scan-{n}.png", data=scans[n])},
            attachment_max_bytes=10**6,
            storage=get_storage(),
        )
        return sign_filled(r.id, filled, name=f"Signer {n}")

    results = race(app, attempt)
    (winner,) = [n for n, status in results.items() if status == "signed"]
    assert sorted(results.values()) == ["already_signed"] * 3 + ["signed"]
    values = saved(r.id)
    assert len(values) == len(FIELDS) and values["note"].value == f"try {winner}"
    assert values["id_scan"].value == f"scan-{winner}.png"
    assert get_storage().get(values["id_scan"].storage_key) == scans[winner]


def test_a_pdf_forms_fields_are_marked_at_their_places_on_their_pages(app, client, smtp, run_jobs):
    from tests.doc_templates.test_fields import _form

    source = _form(("field_iban", "text", 0, 600), ("field_agree", "checkbox", 0, 500), ("field_city", "text", 1, 700))
    batch_id = make_batch(now=utcnow(), recipients=[("eva@example.com", "Eva")], kind="pdf", file=source)
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    (invitation,) = smtp.to("eva@example.com")
    token = re.search(r"/sign/([A-Za-z0-9_-]+)", invitation.text()).group(1)
    html = client.get(f"/sign/{token}").get_data(as_text=True)
    pages = re.findall(r'<li class="doc-page">(.*?)</li>', html, re.S)
    placed = [re.findall(r'href="#field-(\w+)" data-place="([\d. ]+)"', page) for page in pages]
    # An A4 page is 595 × 842 pt: the IBAN's 200 × 20 box at (72, 600) is 12.1 % from the left, 26.37 % from the top.
    assert placed == [
        [("iban", "12.1 26.37 33.61 2.38"), ("agree", "12.1 38.95 2.35 1.66")],
        [("city", "12.1 14.49 33.61 2.38")],
    ]


class RefusingStorage:
    """A storage backend that is down."""

    def put(self, key, data, *, content_type="application/pdf"):
        raise StorageError("the bucket does not answer")


def test_an_attachment_storage_cannot_take_undoes_the_sign_and_saves_nothing(app, users):
    r = contract(users)
    typed = {k.removeprefix("field-"): v for k, v in GOOD.items()}
    filled = FilledForm(
        typed=typed,
        files={"id_scan": Upload(filename="scan.png", data=a_png())},
        attachment_max_bytes=10**6,
        storage=RefusingStorage(),
    )
    assert sign_filled(r.id, filled) == (
        "invalid: Your file could not be stored just now. Choose it again and sign in a minute."
    )
    assert fresh(r.id).status != "signed" and saved(r.id) == {}
    # Storage back: the same values sign.
    assert sign_filled(r.id, dataclasses.replace(filled, storage=get_storage())) == "signed"
    assert len(saved(r.id)) == len(FIELDS)


def test_a_pattern_that_backtracks_without_end_is_cut_off_and_refuses_the_value(app, users):
    """Staff wrote a pattern Python's re would take for ever on ("(a|aa)+$" over 60 letters and a b: about
    2^40 steps): the check gives up within its time limit and says the value is not in the expected form."""
    fields = [{"name": "code", "label": "Code", "pattern": "(a|aa)+"}, *FIELDS[1:]]
    html = CONTRACT.replace("field_iban", "field_code")
    r = make_sent_request(now=utcnow(), owner=users["staff"], html=html, fields=fields)
    filled = FilledForm(typed={"code": "a" * 60 + "b"}, files={}, attachment_max_bytes=10**6, storage=None)
    started = time.monotonic()
    checked = check_entries(fresh(r.id), role="recipient", filled=filled)
    assert time.monotonic() - started < 5
    assert checked.errors["code"].english == "“Code” is not in the expected form."
