"""An .xlsx cell read as its number format shows it, in the batch's language; a CSV as typed."""

from __future__ import annotations

import io
from datetime import datetime

import openpyxl
import pytest

from bulksign.recipients.cell_formats import format_for
from bulksign.recipients.column_mapping import parse_mapping
from bulksign.recipients.validation import validate_recipients

NBSP = "\u00a0"


@pytest.mark.parametrize(
    "code, value, ru, en",
    [
        ("DD.MM.YYYY", datetime(2027, 2, 1), "01.02.2027", "01.02.2027"),
        ("d mmmm yyyy", datetime(2027, 2, 1), "1 февраля 2027", "1 February 2027"),
        ("yyyy-mm-dd hh:mm", datetime(2027, 2, 1, 9, 5), "2027-02-01 09:05", "2027-02-01 09:05"),
        ("h:mm AM/PM", datetime(2027, 2, 1, 15, 30), "3:30 PM", "3:30 PM"),
        ("[$-F800]dddd, mmmm dd, yyyy", datetime(2027, 2, 1), f"1 февраля 2027{NBSP}г.", "February 1, 2027"),
        ('#,##0 "₽"', 120000, f"120{NBSP}000 ₽", "120,000 ₽"),
        ("#,##0.00 [$₽-419]", 120000.5, f"120{NBSP}000,50 ₽", "120,000.50 ₽"),
        ("[$€-x-euro2] #,##0.00", 1234.5, f"€ 1{NBSP}234,50", "€ 1,234.50"),
        ("#,##0 USD", 1500, f"1{NBSP}500 USD", "1,500 USD"),
        ("00000", 42, "00042", "00042"),
        ("#,##0", 2.5, "3", "3"),
        ("0.0%", 0.155, "15,5%", "15.5%"),
        ("0%", 1, "100%", "100%"),
        ("#,##0;[Red]-#,##0", -1200, f"-1{NBSP}200", "-1,200"),
        ('#,##0.00;(#,##0.00);"—"', 0, "—", "—"),
        ('#,##0," тыс."', 1_250_000, f"1{NBSP}250 тыс.", "1,250 тыс."),
    ],
)
def test_a_number_format_shows_the_value_as_excel_does_in_the_batchs_language(code, value, ru, en):
    assert format_for(code, language="ru")(value) == ru
    assert format_for(code, language="en")(value) == en


@pytest.mark.parametrize("code", ["General", "@", "0.00E+00", "# ?/?", "[h]:mm:ss"])
def test_general_text_and_formats_not_read_here_keep_the_stored_value(code):
    assert format_for(code, language="ru") is None


def _workbook(header: list[str], row: list, formats: dict[str, str]) -> bytes:
    workbook = openpyxl.Workbook()
    workbook.active.append(header)
    workbook.active.append(row)
    for cell, code in formats.items():
        workbook.active[cell].number_format = code
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def test_an_hr_workbook_reads_as_it_shows_dates_money_and_leading_zero_numbers():
    data = _workbook(
        ["email", "name", "start_date", "salary", "personnel_number", "plain"],
        ["a@example.com", "Анна", datetime(2027, 2, 1), 120000, 42, 1234.5],
        {"C2": "DD.MM.YYYY", "D2": '#,##0 "₽"', "E2": "00000"},
    )
    variables = ["name", "start_date", "salary", "personnel_number", "plain"]
    ru = validate_recipients(data, filename="hr.xlsx", variables=variables, keep_rows=True, language="ru")
    assert ru.recipients[0].data == {
        "name": "Анна",
        "start_date": "01.02.2027",
        "salary": f"120{NBSP}000 ₽",
        "personnel_number": "00042",
        "plain": "1234.5",
    }
    en = validate_recipients(data, filename="hr.xlsx", variables=variables, keep_rows=True, language="en")
    assert en.recipients[0].data["salary"] == "120,000 ₽"


def test_a_csv_reads_as_typed():
    data = "email;start_date;salary\na@example.com;01.02.2027;120 000\n".encode("cp1251")
    report = validate_recipients(data, filename="hr.csv", variables=["start_date", "salary"], keep_rows=True)
    assert report.recipients[0].data == {"start_date": "01.02.2027", "salary": "120 000"}


def test_a_formula_cell_is_never_calculated_and_hostile_formats_keep_the_stored_value():
    data = _workbook(
        ["email", "salary", "huge", "zeros", "odd", "date"],
        ["a@example.com", "=1+1", 1e300, 7, 5, datetime(2027, 2, 1)],
        {
            "B2": '#,##0.00"' + "x" * 5000 + '"',
            "C2": "#,##0.00",
            "D2": "0" * 250,
            "E2": '[$-]"unclosed',
            "F2": "[$-F800]dddd, mmmm dd, yyyy",
        },
    )
    variables = ["salary", "huge", "zeros", "odd", "date"]
    report = validate_recipients(data, filename="x.xlsx", variables=variables, keep_rows=True, language="ru")
    assert report.recipients[0].data == {
        "salary": "=1+1",
        "huge": str(int(1e300)),  # beyond what a format rounds: as stored
        "zeros": "0" * 249 + "7",
        "odd": "1900-01-05",  # openpyxl reads a format with a "d" as a date's; not one to show: ISO
        "date": f"1 февраля 2027{NBSP}г.",
    }


def test_a_template_asking_for_the_raw_value_gets_the_cell_as_stored():
    data = _workbook(
        ["email", "Оклад", "Дата"],
        ["a@example.com", 120000, datetime(2027, 2, 1)],
        {"B2": '#,##0 "₽"', "C2": "DD.MM.YYYY"},
    )
    variables = ["salary", "salary_raw", "start_date", "start_date_raw"]
    mapping = parse_mapping({"salary": "Оклад", "start_date": "Дата"})
    report = validate_recipients(
        data, filename="x.xlsx", variables=variables, keep_rows=True, language="ru", mapping=mapping
    )
    assert (report.missing_columns, report.recipients[0].data) == (
        (),
        {
            "salary": f"120{NBSP}000 ₽",
            "salary_raw": "120000",
            "start_date": "01.02.2027",
            "start_date_raw": "2027-02-01",
        },
    )
    typed = validate_recipients(
        b"email,salary\na@example.com,120 000\n", filename="x.csv", variables=["salary", "salary_raw"], keep_rows=True
    )
    assert typed.recipients[0].data == {"salary": "120 000", "salary_raw": "120 000"}
