"""One-time codes for every party of a document several sign: each confirms a code of its own (SMS to its
``<role>_phone`` when given, else mail) before it can read, sign or decline; on real workers, real mail and the
development SMS mailbox; the audit certificate names each party's identity check."""

from __future__ import annotations

import re
import subprocess

from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.mail.devmail import list_caught, mailbox_folder, read_caught
from bulksign.models import Document, OneTimeCode, SigningRequest
from tests.signing.test_routing import _mails_to, _parties, _sent, _token
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from

PHONE_EMPLOYER = {
    "parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss", "phone": "+49 170 7654321"}}'
}


def _code(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


def _wrong(code: str) -> str:
    return str((int(code) + 1) % 1_000_000).zfill(6)


def _sign_form(client, token: str, name: str):
    page = client.get(f"/sign/{token}")
    data = {"csrf_token": csrf_from(page), "name": name, "consent": "yes", "signature": data_url(png())}
    return client.post(f"/sign/{token}/sign", data=data)


def test_each_party_confirms_its_own_code_before_reading_or_signing(app, users, client, smtp, run_jobs, tmp_path):
    request_id = _sent(users, run_jobs, form=PHONE_EMPLOYER, one_time_code=True)
    employee = _token(smtp.received[0])
    page = client.get(f"/sign/{employee}")
    assert b"Send me a code" in page.data
    csrf = csrf_from(page)
    assert client.post(f"/sign/{employee}/code", data={"csrf_token": csrf}).status_code == 303
    run_jobs("mail")
    (mailed,) = smtp.of_kind("code")
    assert mailed.rcpt_tos == ["eva@example.com"] and "Eva Employee" in mailed.text()
    assert (
        client.post(
            f"/sign/{employee}/code/verify", data={"csrf_token": csrf, "code": _code(mailed.text())}
        ).status_code
        == 303
    )
    assert _sign_form(client, employee, "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")

    employer = _token(_mails_to(smtp, "hr@acme.example")[0])
    # The same browser confirmed the employee's code: the employer's link still asks for its own.
    page = client.get(f"/sign/{employer}")
    assert b"Send me a code" in page.data and "••••••••••21" in page.get_data(as_text=True)
    assert client.get(f"/sign/{employer}/document").status_code == 403
    assert client.get(f"/sign/{employer}/pages/1").status_code == 403
    assert _sign_form(client, employer, "Anna Boss").status_code == 303
    assert _parties(request_id)["employer"].status != "signed"  # no code yet: not signed
    assert client.post(f"/sign/{employer}/code", data={"csrf_token": csrf}).status_code == 303
    run_jobs("mail")  # no SMS provider here: the SMS lands in the development mailbox
    folder = mailbox_folder(app.config["VAR_DIR"])
    (sms,) = [m for m in list_caught(folder).mails if m.subject == "SMS to +49 170 7654321"]
    code = _code(read_caught(folder, sms.name).get_content())
    (row,) = db.session.scalars(select(OneTimeCode).where(OneTimeCode.party_id.is_not(None))).all()
    assert (row.channel, row.party_id) == ("sms", _parties(request_id)["employer"].id)
    refused = client.post(f"/sign/{employer}/code/verify", data={"csrf_token": csrf, "code": _wrong(code)})
    assert refused.status_code == 422 and b"4 more tries" in refused.data
    assert client.post(f"/sign/{employer}/code/verify", data={"csrf_token": csrf, "code": code}).status_code == 303
    assert client.get(f"/sign/{employer}/document").status_code == 200
    assert _sign_form(client, employer, "Anna Boss").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"

    run_jobs("pdf", "mail")
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    path = tmp_path / "signed.pdf"
    path.write_bytes(get_storage().get(signed.storage_key))
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, timeout=30).stdout
    certificate = text[text.index("Audit certificate") :]
    assert "One-time code sent by email to e•••@example.com, confirmed" in certificate
    assert "One-time code sent by SMS to ••••••••••21, confirmed" in certificate
