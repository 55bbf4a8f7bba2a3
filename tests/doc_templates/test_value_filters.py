"""Dates, money and amounts in words in the batch's language, in HTML and Word templates; a value that is not a
date or a number refused naming it, at the file check as a row error on the file's own cell."""

from __future__ import annotations

import io

import pytest
from docx import Document as WordDocument

from bulksign.doc_templates import docx_templates
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.jinja_sandbox import ALLOWED_FILTERS, render_html
from bulksign.doc_templates.value_filters import LANGUAGE_VARIABLE
from bulksign.recipients.column_mapping import parse_mapping
from bulksign.recipients.validation import validate_recipients
from tests.support import docx_files

NBSP = "\u00a0"


@pytest.mark.parametrize(
    "template, value, ru, en",
    [
        ("{{ v|date }}", "01.02.2027", "1 февр. 2027 г.", "Feb 1, 2027"),
        ('{{ v|date("long") }}', "2027-02-01", "1 февраля 2027 г.", "February 1, 2027"),
        ('{{ v|date("short") }}', "2027-02-01 00:00:00", "01.02.2027", "2/1/27"),
        ('{{ v|date("dd.MM.yyyy") }}', "1.2.2027", "01.02.2027", "01.02.2027"),
        ("{{ v|money }}", f"120{NBSP}000 ₽", "120 000,00 ₽", "RUB120,000.00"),
        ("{{ v|money }}", "120000", "120 000,00 ₽", "€120,000.00"),
        ('{{ v|money("EUR") }}', "120 000,5", "120 000,50 €", "€120,000.50"),
        ("{{ v|money }}", "$1,234.50", "1 234,50 $", "$1,234.50"),
        ("{{ v|number(2) }}", "1234,5", "1 234,50", "1,234.50"),
        (
            "{{ v|in_words }}",
            "120 000",
            "сто двадцать тысяч рублей 00 копеек",
            "one hundred and twenty thousand euro 00 cents",
        ),
        ("{{ v|in_words }}", "1,01 ₽", "один рубль 01 копейка", "one rouble 01 kopek"),
        ("[{{ v|date }}{{ v|money }}]", "", "[]", "[]"),
    ],
)
def test_a_value_is_shown_as_a_date_or_money_in_the_batchs_language(template, value, ru, en):
    for language, expected in (("ru", ru), ("en", en)):
        shown = render_html(template, {"v": value, LANGUAGE_VARIABLE: language})
        assert shown.replace(NBSP, " ") == expected


@pytest.mark.parametrize(
    "template, value, message",
    [
        ("{{ v|date }}", "soon", '"soon" is not a date, and the template shows it as one (|date).'),
        ("{{ v|date }}", "31.02.2027", '"31.02.2027" is not a date, and the template shows it as one (|date).'),
        ("{{ v|money }}", "a lot", '"a lot" is not a number, and the template shows it as one (|money).'),
        ("{{ v|in_words }}", "1e400", '"1e400" is not a number, and the template shows it as one (|in_words).'),
        ("{{ v|in_words }}", "NaN", '"NaN" is not a number, and the template shows it as one (|in_words).'),
        ('{{ v|date("qqqqqqqq" * 9) }}', "01.02.2027", "is not a date style: use short, medium, long or full."),
    ],
)
def test_a_value_that_is_not_a_date_or_a_number_is_refused_naming_it(template, value, message):
    with pytest.raises(TemplateError) as refused:
        render_html(template, {"v": value, LANGUAGE_VARIABLE: "ru"})
    assert message in str(refused.value.message)


def test_the_filters_are_offered_with_the_others():
    assert {"date", "money", "number", "in_words"} <= set(ALLOWED_FILTERS)


def test_a_word_template_formats_with_the_same_filters():
    source = docx_files.simple('Дата: {{ start|date("long") }}; оклад: {{ salary|money }} ({{ salary|in_words }})')
    filled = docx_templates.fill(source, {"start": "01.02.2027", "salary": "120000", LANGUAGE_VARIABLE: "ru"})
    text = "\n".join(p.text for p in WordDocument(io.BytesIO(filled)).paragraphs).replace(NBSP, " ")
    assert "Дата: 1 февраля 2027 г.; оклад: 120 000,00 ₽ (сто двадцать тысяч рублей 00 копеек)" in text


def test_the_file_check_refuses_a_row_whose_value_is_not_a_date_or_a_number_naming_its_cell():
    data = "Почта;Дата начала;Оклад\na@example.com;01.02.2027;120 000\nb@example.com;скоро;много\n".encode("cp1251")
    report = validate_recipients(
        data,
        filename="hr.csv",
        variables=["start_date", "salary"],
        kinds={"start_date": "date", "salary": "number"},
        mapping=parse_mapping({"email": "Почта", "start_date": "Дата начала", "salary": "Оклад"}),
    )
    assert (report.valid_rows, report.invalid_rows) == (1, 1)
    assert [(e.row, e.column, e.message) for e in report.errors] == [
        (
            3,
            "Дата начала",
            '"скоро" is not a date: the template shows {{ start_date|date }}. Put a date in this cell, as 01.02.2027 '
            "or 2027-02-01.",
        ),
        (
            3,
            "Оклад",
            '"много" is not a number: the template shows {{ salary }} as an amount. Put a number in this cell, as '
            "120000 or 120 000,50.",
        ),
    ]


def test_the_columns_a_template_shows_as_dates_or_numbers_are_read_from_it():
    from bulksign.doc_templates.columns import value_kinds
    from bulksign.models import TemplateVersion

    html = '{{ start|date("long") }} {{ salary|money }} {{ (bonus|in_words) }} {{ name|upper }} {{ x.y|date }}'
    version = TemplateVersion(kind="html", html=html, variables=["start", "salary", "bonus", "name", "x"])
    assert value_kinds(version) == {"start": "date", "salary": "number", "bonus": "number"}
