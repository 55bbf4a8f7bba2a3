"""Staff check an HR export whose columns are named in Russian: the page offers the file's columns with their first
values, staff confirm them, and open any row as its document; at a desktop and a phone width, axe-clean."""

from __future__ import annotations

import io
from datetime import datetime

import openpyxl
import pytest
from pypdf import PdfReader

from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at

pytestmark = pytest.mark.browser

CONTRACT = (
    "<h1>Трудовой договор</h1><p>{{ name }}, табельный № {{ personnel_number }}, принят на должность "
    "{{ position }} с {{ start_date|date('long') }} на оклад {{ salary|money }} ({{ salary|in_words }}).</p>"
    "<p>Подпись работника: {{ signature }}</p>"
)


def _export() -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["Фамилия", "Имя", "Отчество", "Эл. почта", "Должность", "Табельный номер", "Дата приёма", "Оклад"])
    people = [
        ("Иванов", "Иван", "Иванович", "ivan@example.ru", "Логист", 42, datetime(2027, 2, 1), 120000),
        ("Петрова", "Анна", "Сергеевна", "anna@example.ru", "Бухгалтер", 7, datetime(2027, 3, 15), 95500),
        ("Сидоров", "Пётр", "", "petr@example.ru", "Водитель", 113, datetime(2027, 4, 1), 80000),
    ]
    for number, person in enumerate(people, start=2):
        sheet.append(list(person))
        sheet[f"F{number}"].number_format = "00000"
        sheet[f"G{number}"].number_format = "DD.MM.YYYY"
        sheet[f"H{number}"].number_format = '#,##0 "₽"'
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def test_the_columns_are_matched_on_the_check_page_and_any_row_opens_as_its_document(users, live_server, page):
    from bulksign.core.extensions import db
    from bulksign.doc_templates.versions import create_template
    from tests.support.clock import NOW

    template = create_template(db.session, name="Трудовой договор", html=CONTRACT, user=users["staff"], now=NOW)
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/new?template_id={template.template.id}")
    # The recipients read Russian: the file's values and the documents are in it.
    page.select_option("#create-form select[name=language]", "ru")
    page.set_input_files(
        "input[name=file]",
        files=[{"name": "export.xlsx", "mimeType": "application/octet-stream", "buffer": _export()}],
    )
    page.click("text=Check the file")
    page.locator("#column-mapping").wait_for()
    # The name is suggested joined from its three columns; each option shows the column's first values.
    names = page.locator("select[name='column.name']")
    assert [names.nth(i).input_value() for i in range(3)] == ["Фамилия", "Имя", "Отчество"]
    assert page.locator("select[name='column.start_date'] option:checked").inner_text() == (
        "Дата приёма — 01.02.2027, 15.03.2027, 01.04.2027"
    )
    assert page.locator("#valid-rows").inner_text() == "0"
    found = look_at(page, live_server, "column-mapping-offered")
    assert found == {1366: [], 360: []}, found

    page.click("#confirm-columns")
    page.locator("#row-preview").wait_for()
    assert page.locator("#valid-rows").inner_text() == "3"

    page.fill("#row-query", "петрова")
    page.click(".row-search button:not([name])")
    page.locator("#row-list .row-link").first.wait_for()
    assert page.locator("#row-list .row-link").all_inner_texts() == ["Row 3: Петрова Анна Сергеевна · anna@example.ru"]
    page.click("#row-list .row-link")
    image = page.locator("#row-view .row-pages img").first
    image.wait_for()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    pdf = page.request.get(live_server + page.locator("#row-pdf").get_attribute("href"))
    text = " ".join(PdfReader(io.BytesIO(pdf.body())).pages[0].extract_text().split())
    assert "с 15 марта 2027 г. на оклад 95 500,00 ₽ (девяносто пять тысяч пятьсот рублей 00 копеек)" in text
    found = look_at(page, live_server, "row-preview")
    assert found == {1366: [], 360: []}, found

    page.click("#row-shuffle")
    page.wait_for_function("() => document.querySelectorAll('#row-list .row-link').length === 3")
