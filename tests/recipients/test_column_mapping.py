"""A file whose columns are named otherwise than the template's: suggested, mapped, joined, refused when the mapping
does not fit, and errors that name the file's own column."""

from __future__ import annotations

import pytest

from bulksign.recipients.column_guess import suggest
from bulksign.recipients.column_mapping import parse_mapping
from bulksign.recipients.headers import Match
from bulksign.recipients.rows import UploadError
from bulksign.recipients.validation import error_report_csv, validate_recipients

VARS = ["name", "position", "start_date", "salary"]
HR_EXPORT = (
    "ФИО;Почта;Должность;Дата начала;Оклад;Телефон\r\n"
    "Иванов Иван Иванович;ivan@example.ru;Логист;01.02.2027;120 000;+7 916 123-45-67\r\n"
    "Петрова Анна Сергеевна;anna@example.ru;Бухгалтер;15.03.2027;95 000;+7 916 765-43-21\r\n"
    "Сидоров Пётр;petr@example.ru;Водитель;01.04.2027;80 000;+7 916 000-11-22\r\n"
).encode("cp1251")
MAPPED = {"email": "Почта", "name": "ФИО", "position": "Должность", "start_date": "Дата начала", "salary": "Оклад"}


def check(data: bytes = HR_EXPORT, *, filename: str = "hr.csv", variables=VARS, **kw):
    return validate_recipients(data, filename=filename, variables=variables, **kw)


def test_a_russian_hr_export_gets_every_column_suggested_with_three_sample_values():
    report = check()
    assert report.missing_columns == ("email", "position", "salary", "start_date") and report.valid_rows == 0
    assert [(c.column, c.headers, c.how, c.required) for c in report.choices] == [
        ("email", ("Почта",), Match.SUGGESTED, True),
        ("name", ("ФИО",), Match.SUGGESTED, False),
        ("position", ("Должность",), Match.SUGGESTED, True),
        ("start_date", ("Дата начала",), Match.SUGGESTED, True),
        ("salary", ("Оклад",), Match.SUGGESTED, True),
        ("phone", ("Телефон",), Match.SUGGESTED, False),
    ]
    assert report.samples["ФИО"] == ("Иванов Иван Иванович", "Петрова Анна Сергеевна", "Сидоров Пётр")
    assert report.as_dict()["unmatched_columns"] == [
        {"column": "email", "suggestion": ["Почта"]},
        {"column": "position", "suggestion": ["Должность"]},
        {"column": "start_date", "suggestion": ["Дата начала"]},
        {"column": "salary", "suggestion": ["Оклад"]},
    ]


@pytest.mark.parametrize(
    "header, column",
    [
        ("Full name", "name"),
        ("E-mail", "email"),
        ("Эл. почта", "email"),
        ("Dolzhnost", "position"),
        ("Job title", "position"),
        ("Мобильный телефон", "phone"),
        ("Start", "start_date"),
    ],
)
def test_names_in_either_language_transliterated_or_synonyms_are_suggested(header, column):
    assert suggest([column], headers=["x", header], samples={}) == {column: (header,)}


@pytest.mark.parametrize(
    "values, column",
    [
        (["ул. Ленина, д. 5", "пр. Мира 12, кв. 3", "Main Street 7"], "address"),
        (["01.02.2027", "15.03.2027", "2027-04-01"], "start_date"),
        (["+7 916 123-45-67", "+49 170 1234567", "8 (916) 000-11-22"], "phone"),
        (["a@example.com", "b@example.org", ""], "email"),
    ],
)
def test_a_column_named_nothing_known_is_suggested_by_the_shape_of_its_values(values, column):
    samples = {"Колонка 1": ["Иван", "Анна", "Пётр"], "Колонка 2": values}
    assert suggest([column], headers=["Колонка 1", "Колонка 2"], samples=samples) == {column: ("Колонка 2",)}


def test_a_salary_is_not_taken_for_a_phone_number():
    samples = {"Сумма": ["1 200 000", "950000", "80 000"]}
    assert suggest(["phone"], headers=["Сумма"], samples=samples) == {}


def test_a_name_kept_in_three_columns_is_suggested_joined_and_joined_by_the_mapping():
    data = "Фамилия,Имя,Отчество,E-mail,Должность\nИванов,Иван,Иванович,i@example.ru,Логист\nКим,Анна,,k@example.ru,Юрист\n"
    report = check(data.encode(), variables=["name", "position"])
    assert report.choices[1].headers == ("Фамилия", "Имя", "Отчество")
    mapped = check(
        data.encode(),
        variables=["name", "position"],
        keep_rows=True,
        mapping=parse_mapping({"name": ["Фамилия", "Имя", "Отчество"], "position": "Должность"}),
    )
    assert [r.name for r in mapped.recipients] == ["Иванов Иван Иванович", "Ким Анна"]
    assert mapped.warnings == () and mapped.errors == ()


def test_mapped_rows_are_checked_as_before_and_errors_name_the_files_own_column():
    data = HR_EXPORT + "Без Почты;;Логист;01.05.2027;1;\r\nКлон;ivan@example.ru;;01.05.2027;1;\r\n".encode("cp1251")
    report = check(data, mapping=parse_mapping(MAPPED), keep_rows=True, max_errors=None)
    assert (report.valid_rows, report.invalid_rows) == (3, 2)
    assert [(e.row, e.column, e.message) for e in report.errors] == [
        (5, "Почта", "The email address is empty."),
        (6, "Почта", "Duplicate email: ivan@example.ru is already on row 2."),
        (6, "Должность", "The value is empty; the template needs {{ position }}."),
    ]
    assert report.recipients[0].data == {
        "name": "Иванов Иван Иванович",
        "position": "Логист",
        "start_date": "01.02.2027",
        "salary": "120 000",
    }
    assert error_report_csv(report).splitlines()[0] == (
        '"row","column","message","ФИО","Почта","Должность","Дата начала","Оклад","Телефон"'
    )


def test_a_remembered_mapping_is_used_when_the_file_has_its_columns_and_offered_otherwise():
    remembered = parse_mapping(MAPPED)
    used = check(remembered=remembered)
    assert (used.valid_rows, used.mapping_remembered, used.mapping) == (3, True, remembered)
    other = check(b"email,name,position,start_date,salary\na@example.com,A,B,C,D\n", remembered=remembered)
    assert (other.valid_rows, other.mapping_remembered, other.mapping) == (1, False, None)


def test_the_mapped_column_wins_over_a_column_of_the_same_name_which_is_said_unused():
    data = b"email,Mail 2,name,position,start_date,salary\nold@example.com,new@example.com,A,B,C,D\n"
    report = check(data, mapping=parse_mapping({"email": "Mail 2"}), keep_rows=True)
    assert report.recipients[0].email == "new@example.com"
    assert 'The column "email" is not used: the columns as matched fill {{ email }}.' in report.warnings


@pytest.mark.parametrize(
    "mapping, message",
    [
        (
            {"name": "Имя клиента"},
            'The file has no column "Имя клиента" (matched to "name"). Its columns: ФИО, Почта, Должность, '
            "Дата начала, Оклад, Телефон.",
        ),
        ({"nonsense": "ФИО"}, 'The template has no column "nonsense" to match.'),
        (
            {"name": "ФИО", "position": "ФИО"},
            'The file\'s column "ФИО" is matched to both "name" and "position": match each template column to a '
            "column of its own.",
        ),
        ({"name": ["ФИО"] * 6}, '"name" joins more than 5 of the file\'s columns.'),
        ({"name": 5}, 'The columns must be an object of template column → the file\'s column, e.g. {"name": "ФИО"}.'),
        ("[1, 2]", 'The columns must be an object of template column → the file\'s column, e.g. {"name": "ФИО"}.'),
        ({"name": "x" * 201}, "A column name is longer than 200 characters."),
    ],
)
def test_a_mapping_that_does_not_fit_the_file_or_the_template_is_refused_saying_why(mapping, message):
    with pytest.raises(UploadError) as refused:
        check(mapping=parse_mapping(mapping))
    assert refused.value.status == 422 and refused.value.field == "columns"
    assert str(refused.value.message).startswith(message)


def test_duplicate_and_huge_headers_are_still_refused_or_named_with_a_mapping():
    twice = "ФИО;ФИО;Почта\nА;Б;a@example.com\n".encode()
    with pytest.raises(UploadError, match=r'the column "ФИО" twice \(columns A and B\)'):
        check(twice, variables=["name"], mapping=parse_mapping({"name": "ФИО", "email": "Почта"}))
    wide = (";".join(f"Колонка {i}" for i in range(201)) + "\n" + ";" * 200 + "\n").encode()
    with pytest.raises(UploadError, match="201 columns; the limit is 200"):
        check(wide, mapping=parse_mapping({"name": "Колонка 1"}))
    long_header = ("Ф" * 5000 + ";email\nА;a@example.com\n").encode()
    assert check(long_header, variables=["name"]).choices[1].headers == ()


def test_formula_cells_mapped_are_kept_as_text_and_warned_of_under_the_files_column():
    data = 'ФИО,Почта\n=HYPERLINK("http://x"),a@example.com\n'.encode()
    report = check(data, variables=["name"], mapping=parse_mapping({"name": "ФИО", "email": "Почта"}), keep_rows=True)
    assert report.recipients[0].name == '=HYPERLINK("http://x")'
    assert report.warnings == (
        'The column "ФИО" has values that look like formulas (first on row 2); they are kept as plain text and never '
        "calculated.",
    )
