"""From an HR system's export to the documents: an .xlsx with Russian headers, dates, money and leading-zero
personnel numbers matched once on the check page, the next month's CSV (Windows-1251, semicolons) matched as
remembered, and each row's PDF showing the values as the contract writes them."""

from __future__ import annotations

import io
import re
import subprocess
from datetime import datetime

import openpyxl
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, ColumnMapping, Document, SigningRequest
from tests.support.clock import NOW
from tests.support.web import csrf_from

CONTRACT = (
    "<p>{{ name }}, табельный № {{ personnel_number }}, принят с {{ start_date|date('long') }} "
    "на оклад {{ salary|money }} ({{ salary|in_words }}).</p>"
)
HEADERS = ["ФИО", "Эл. почта", "Табельный номер", "Дата приёма", "Оклад"]


def _export() -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(HEADERS)
    sheet.append(["Иванов Иван Иванович", "ivan@example.ru", 42, datetime(2027, 2, 1), 120000])
    sheet.append(["Петрова Анна Сергеевна", "anna@example.ru", 7, datetime(2027, 3, 15), 95500])
    for row in (2, 3):
        sheet[f"C{row}"].number_format = "00000"
        sheet[f"D{row}"].number_format = "DD.MM.YYYY"
        sheet[f"E{row}"].number_format = '#,##0 "₽"'
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def _check(client, template_id: int, data: bytes, filename: str):
    page = client.get(f"/batches/new?template_id={template_id}")
    return page, client.post(
        "/batches/new/validate",
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": template_id,
            "language": "ru",
            "file": (io.BytesIO(data), filename),
        },
    )


def _create(client, page, html: str, name: str):
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', html).group(1)
    return client.post(
        "/batches/new",
        data={
            "csrf_token": csrf_from(page),
            "upload_id": upload_id,
            "form_token": upload_id,
            "name": name,
            "deadline_days": "7",
            "language": "ru",
            "timezone": "Europe/Moscow",
        },
    )


def _texts(batch_name: str) -> dict[str, str]:
    batch = db.session.scalar(select(Batch).where(Batch.name == batch_name))
    texts = {}
    for request in db.session.scalars(select(SigningRequest).where(SigningRequest.batch_id == batch.id)):
        assert request.status == "sent", request.error_message
        document = db.session.scalar(select(Document).where(Document.request_id == request.id))
        pdf = get_storage().get(document.storage_key)
        text = subprocess.run(["pdftotext", "-", "-"], input=pdf, capture_output=True, check=True).stdout.decode()
        texts[request.email] = " ".join(text.split())
    return texts


def test_an_hr_export_is_matched_once_remembered_and_rendered_as_the_contract_writes_it(
    client, auth, users, run_jobs, smtp
):
    template_id = create_template(
        db.session,
        name="Трудовой договор",
        html=CONTRACT,
        user=users["staff"],
        now=NOW,
        email_body="Договор с {{ start_date|date('long') }} ждёт подписи: {{ signing_link }}",
    )
    template_id = template_id.template.id
    db.session.commit()
    auth.login()

    page, checked = _check(client, template_id, _export(), "export.xlsx")
    html = checked.get_data(as_text=True)
    assert 'id="column-mapping"' in html and re.search(r'id="valid-rows">0<', html)
    # Each column suggested, the values as the sheet shows them.
    assert '<option value="Дата приёма" selected>Дата приёма — 01.02.2027, 15.03.2027</option>' in html
    assert '<option value="Табельный номер" selected>Табельный номер — 00042, 00007</option>' in html
    fields = {
        f"column.{column}": re.search(
            rf'<select name="column\.{column}"[^>]*>.*?<option value="([^"]+)" selected>', html, re.S
        ).group(1)
        for column in ("email", "name", "personnel_number", "start_date", "salary")
    }
    assert fields == {
        "column.email": "Эл. почта",
        "column.name": "ФИО",
        "column.personnel_number": "Табельный номер",
        "column.start_date": "Дата приёма",
        "column.salary": "Оклад",
    }
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', html).group(1)
    matched = client.post(
        "/batches/new/match",
        headers={"HX-Request": "true"},
        data={"csrf_token": csrf_from(page), "upload_id": upload_id, "language": "ru", **fields},
    )
    assert re.search(r'id="valid-rows">2<', matched.get_data(as_text=True))
    assert _create(client, page, matched.get_data(as_text=True), "Февраль").status_code == 303

    # Next month's export comes as a Windows-1251 CSV with semicolons: matched as remembered.
    march = (";".join(HEADERS) + "\r\nСидоров Пётр;petr@example.ru;00113;01.04.2027;80 000,00\r\n").encode("cp1251")
    page, again = _check(client, template_id, march, "март.csv")
    html = again.get_data(as_text=True)
    assert 'id="mapping-remembered"' in html and re.search(r'id="valid-rows">1<', html)
    assert _create(client, page, html, "Март").status_code == 303
    assert len(db.session.scalars(select(ColumnMapping)).all()) == 1

    run_jobs("pdf", "mail")
    # The invitation writes the date in the batch's language too.
    bodies = {mail.message["To"]: mail.text() for mail in smtp.of_kind("invitation")}
    assert "Договор с 1 февраля 2027 г. ждёт подписи:" in bodies["ivan@example.ru"].replace("\u00a0", " ")
    assert _texts("Февраль") == {
        "ivan@example.ru": "Иванов Иван Иванович, табельный № 00042, принят с 1 февраля 2027 г. на оклад 120 000,00 ₽ "
        "(сто двадцать тысяч рублей 00 копеек).",
        "anna@example.ru": "Петрова Анна Сергеевна, табельный № 00007, принят с 15 марта 2027 г. на оклад "
        "95 500,00 ₽ (девяносто пять тысяч пятьсот рублей 00 копеек).",
    }
    assert _texts("Март") == {
        "petr@example.ru": "Сидоров Пётр, табельный № 00113, принят с 1 апреля 2027 г. на оклад 80 000,00 ₽ "
        "(восемьдесят тысяч рублей 00 копеек).",
    }
