"""A party's own copy of a document several sign: downloadable from their page right after they signed, with their
signature and marked as waiting for the others; nobody else's link gets it."""

from __future__ import annotations

import io
from urllib.parse import unquote

from pypdf import PdfReader

from tests.signing.test_routing import _mails_to, _sent, _sign, _token


def _text(data: bytes) -> str:
    return " ".join(" ".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages).split())


def test_the_employee_downloads_what_they_signed_before_the_employer_signs(app, users, client, smtp, run_jobs):
    _sent(users, run_jobs)
    employee = _token(smtp.received[0])
    # Before signing there is nothing of theirs to keep.
    assert client.get(f"/sign/{employee}/my-copy").status_code == 404
    assert _sign(client, employee, "Eva Employee").status_code == 303
    page = client.get(f"/sign/{employee}").get_data(as_text=True)
    assert f'href="/sign/{employee}/my-copy"' in page

    copy = client.get(f"/sign/{employee}/my-copy")
    assert copy.status_code == 200 and copy.mimetype == "application/pdf"
    assert copy.headers["Cache-Control"] == "no-store"
    disposition = copy.headers["Content-Disposition"]
    assert disposition.startswith("attachment;")
    assert unquote(disposition.split("filename*=UTF-8''", 1)[1]) == "Employment contract – waiting for Employer.pdf"
    text = _text(copy.data)
    assert "Not complete: waiting for Employer. Keep it until the sealed copy arrives." in text
    assert "Eva Employee" in text

    # The employer's link, invited but not signed: no copy of anyone's.
    run_jobs("pdf", "mail")
    employer = _token(_mails_to(smtp, "hr@acme.example")[0])
    assert client.get(f"/sign/{employer}/my-copy").status_code == 404
    assert client.get(f"/sign/{employer[:-3]}abc/my-copy").status_code == 404
    # Once both signed, the copy gives way to the sealed document.
    assert _sign(client, employer, "Anna Boss").status_code == 303
    assert client.get(f"/sign/{employee}/my-copy").status_code == 404
