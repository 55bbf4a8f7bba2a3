"""Reading and checking recipient files: encodings, delimiters, XLSX, row errors, and bad files."""

from __future__ import annotations

import io
from datetime import date, datetime

import openpyxl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bulksign.core.extensions import db
from bulksign.documents.storage import LocalStorage
from bulksign.mail.email_checks import check_email
from bulksign.models import utcnow
from bulksign.recipients.row_checks import MAX_VALUE_CHARS
from bulksign.recipients.rows import UploadError
from bulksign.recipients.uploads import load_upload, store_upload
from bulksign.recipients.validation import error_report_csv, typo_domains, validate_recipients

VARS = ["name", "position"]


def check(data: bytes, filename: str = "people.csv", variables=VARS, **kw):
    return validate_recipients(data, filename=filename, variables=variables, **kw)


def messages(report):
    return [(e.row, e.column, e.message) for e in report.errors]


def xlsx(rows) -> bytes:
    workbook = openpyxl.Workbook()
    for row in rows:
        workbook.active.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "cp1251"])
@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_russian_files_read_in_any_excel_encoding_and_delimiter(encoding, delimiter):
    text = (
        delimiter.join(["E-mail", "Name", "Position"])
        + "\r\n"
        + delimiter.join(["ivan@example.ru", "Иван Сидоров", "Логист, склад" if delimiter != "," else "Логист"])
        + "\r\n"
    )
    report = check(text.encode(encoding), keep_rows=True)
    assert (report.valid_rows, report.delimiter, report.encoding) == (1, delimiter, encoding)
    assert report.recipients[0].name == "Иван Сидоров"


def test_a_western_windows_file_keeps_its_accents():
    report = check("email;name;position\njose@example.es;José Müller;Señor\n".encode("cp1252"), keep_rows=True)
    assert report.encoding == "cp1252" and report.recipients[0].name == "José Müller"


def test_excel_unicode_text_export_is_read():
    report = check("email\tname\tposition\r\nj@example.com\tJörg\tLead\r\n".encode("utf-16"), filename="x.txt")
    assert report.valid_rows == 1 and report.delimiter == "\t"


@pytest.mark.parametrize(
    "data",
    [b"Please sign the attached contract\nThanks\n", b"people\na@example.com\n", b"\n\nnotes only\n", b'"a,b"\n'],
)
def test_a_txt_file_that_is_not_a_table_is_refused_as_not_a_csv_file(data):
    """Read as a one-column table, it was answered "a header but no rows" or a missing column."""
    with pytest.raises(UploadError) as caught:
        check(data, filename="notes.txt")
    assert caught.value.status == 415 and caught.value.message.startswith("This is not a CSV or XLSX file")


@pytest.mark.parametrize(
    "data", [b"email,name,position\na@example.com,A,B\n", b"\nemail;name;position\r\na@example.com;A;B\r\n"]
)
def test_a_real_csv_saved_as_txt_is_still_read_and_a_one_column_csv_too(data):
    assert check(data, filename="people.txt").valid_rows == 1
    assert check(b"email\na@example.com\n", filename="people.csv", variables=[]).valid_rows == 1
    # A list of addresses under an e-mail header, saved as text, is a one-column table all the same.
    assert check(b"E-mail\na@example.com\nb@example.com\n", filename="people.txt", variables=[]).valid_rows == 2


def test_headers_match_whatever_the_case_and_spaces():
    report = check(b"  EMAIL ,Name,  Position  \na@example.com,A,B\n", keep_rows=True)
    assert report.valid_rows == 1 and report.recipients[0].data == {"name": "A", "position": "B"}


def test_each_row_error_names_the_excel_row_the_column_and_the_problem():
    data = (
        "email,name,position,notes\n"
        "a@example.com,A,Dev,\n"
        "b@gmial.com,B,Dev,\n"
        "A@example.com,C,Dev,\n"
        "not-an-email,D,Dev,\n"
        ",E,Dev,\n"
        "\n"
        "f@example.com,F,,\n"
        f"g@example.com,G,{'x' * 10_000},\n"
        "h@example.com,H,Dev,,surprise\n"
    ).encode()
    report = check(data)
    assert (report.total_rows, report.valid_rows, report.invalid_rows) == (8, 1, 7)
    found = messages(report)
    assert found[0] == (3, "email", "The domain looks misspelt: did you mean b@gmail.com?")
    assert found[1] == (4, "email", "Duplicate email: A@example.com is already on row 2.")
    assert found[2][:2] == (5, "email") and found[2][2].startswith("Not a valid email address")
    assert found[3] == (6, "email", "The email address is empty.")
    assert found[4] == (8, "position", "The value is empty; the template needs {{ position }}.")
    assert found[5] == (9, "position", f"Too long: 10,000 characters; the limit is {MAX_VALUE_CHARS:,}.")
    assert found[6][:2] == (10, "E") and "5 values but the header has 4 columns" in found[6][2]
    assert report.warnings == ('The column "notes" is not used by the template; it is ignored.',)


@pytest.mark.parametrize(
    "domain, meant",
    [
        ("gmial.com", "gmail.com"),
        ("hotmial.com", "hotmail.com"),
        ("yahho.com", "yahoo.com"),
        ("mail.ry", "mail.ru"),
        ("gmail.con", "gmail.com"),
        ("yandex.ri", "yandex.ru"),
    ],
)
def test_obvious_domain_typos_get_a_suggestion(domain, meant):
    address, problem = check_email(f"anna@{domain}")
    assert address is None and problem.endswith(f"did you mean anna@{meant}?")


@pytest.mark.parametrize(
    "address", ["anna@mail.com", "anna@gmx.com", "anna@mil.ru", "Anna.O'Neil+x@Example.COM", "иван@пример.рф"]
)
def test_real_domains_are_not_called_typos(address):
    assert check_email(address)[1] is None


def test_a_missing_column_makes_every_row_unusable():
    report = check(b"email,name\na@example.com,A\nb@example.com,B\n")
    assert report.valid_rows == 0 and report.missing_columns == ("position",)
    assert messages(report) == [(1, "position", 'The column "position" is missing: the template uses {{ position }}.')]


def test_a_file_without_an_email_column_is_explained():
    report = check(b"name,position\nA,B\n")
    assert messages(report)[0] == (1, "email", 'The column "email" is missing: every recipient needs an email address.')


def test_xlsx_first_sheet_with_numbers_dates_and_formulas_kept_as_text():
    data = xlsx(
        [
            ["Email", "Name", "Position", "Phone", "Start"],
            ["a@example.com", '=HYPERLINK("http://evil.example/","Click")', "Dev", 79161234567, date(2027, 1, 2)],
            [None, None, None, None, None],
            ["b@example.com", "B", "Ops", None, None],
        ]
    )
    report = check(data, filename="people.xlsx", variables=["name", "position", "start"], keep_rows=True)
    assert report.file_format == "xlsx" and report.total_rows == 2 and report.invalid_rows == 1
    first = report.recipients[0]
    assert first.name == '=HYPERLINK("http://evil.example/","Click")' and first.phone == "79161234567"
    assert first.data["start"] == "2027-01-02"
    assert messages(report) == [(4, "Start", "The value is empty; the template needs {{ start }}.")]
    assert any("formulas" in w and "never calculated" in w for w in report.warnings)


def test_phone_numbers_and_signed_numbers_are_not_taken_for_formulas():
    data = b"email,name,phone,bonus\na@example.com,A,+491701234567,-500\nb@example.com,B,+49 (170) 123-45,+7\n"
    report = check(data, variables=["name", "bonus"])
    assert report.valid_rows == 2 and not any("formulas" in str(w) for w in report.warnings)
    assert any("formulas" in str(w) for w in check(b"email,name\na@example.com,=1+2\n", variables=["name"]).warnings)


@pytest.mark.parametrize(
    "data, filename, status, words",
    [
        (b"", "a.csv", 400, "empty"),
        (b"\xef\xbb\xbf  \r\n", "a.csv", 400, "empty"),
        (b"email,name,position\n", "a.csv", 400, "header but no rows"),
        (b"email,name\n,\n,,\n", "a.csv", 400, "header but no rows"),
        (b"\x00\x01\x02garbage\xff\xfe" * 50, "a.csv", 400, "binary"),
        (b"email\na@example.com\n", "a.pdf", 415, ".csv or .xlsx"),
        (b"email\na@example.com\n", "recipients", 415, "no extension"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, "a.xls", 415, "old Excel"),
        (b"email\na@example.com\n", "a.xlsx", 400, "not an Excel workbook"),
        (b"PK\x03\x04broken zip", "a.xlsx", 400, "could not be read"),
        (
            "email,name\nj@x.de,Jörg Müller\n".encode() + "k@x.de,Jörg Möller\n".encode("cp1252"),
            "a.csv",
            400,
            "mixes text encodings: line 3",
        ),
        (b'email,name,position\n"a@example.com,A\n', "a.csv", 400, ""),
    ],
)
def test_unreadable_files_get_a_clear_error(data, filename, status, words):
    try:
        check(data, filename=filename)
    except UploadError as exc:
        assert exc.status == status and words in exc.message
    else:
        assert words == "", "an unclosed quote may read as one long value, but must not crash"


def test_the_error_report_lists_every_error_and_cannot_run_formulas():
    rows = "\n".join(f"bad{i}@,N,P" for i in range(150))
    data = f"email,name,position,=cmd|' /C calc'!A0\n{rows}\n".encode()
    shown = check(data)
    assert len(shown.errors) == 100 and shown.error_count == 150 and shown.errors_truncated
    full = check(data, max_errors=None)
    report = error_report_csv(full)
    # Each error line carries the row's values; the formula-like header is neutralised, and only a warning.
    assert report.splitlines()[0] == '"row","column","message","email","name","position","\'=cmd|\' /C calc\'!A0"'
    assert len(report.splitlines()) == 151 and ',"=' not in report
    assert any("=cmd" in w for w in full.warnings)


def test_a_duplicate_header_is_an_error():
    report = check(b"email,name,Email,position\na@example.com,A,b@example.com,P\n")
    assert report.valid_rows == 0 and "appears twice (columns A and C)" in report.errors[0].message


def test_stored_uploads_belong_to_their_user(tmp_path, users):
    storage, staff, admin = LocalStorage(tmp_path), users["staff"].id, users["admin"].id
    stored = store_upload(
        db.session,
        storage,
        data=b"email\na@b.co\n",
        filename="../../etc/people.csv",
        user_id=staff,
        template_id=5,
        now=utcnow(),
    )
    db.session.commit()
    loaded = load_upload(db.session, storage, upload_id=stored.upload_id, user_id=staff)
    assert (loaded.data, loaded.filename, loaded.template_id) == (b"email\na@b.co\n", "people.csv", 5)
    for upload_id, user_id in ((stored.upload_id, admin), ("../secret", staff), ("0" * 32, staff)):
        with pytest.raises(UploadError) as caught:
            load_upload(db.session, storage, upload_id=upload_id, user_id=user_id)
        assert caught.value.status == 410


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2000), filename=st.sampled_from(["a.csv", "a.xlsx", "a.txt", "a.tsv"]))
def test_random_bytes_never_crash_the_reader(data, filename):
    try:
        report = check(data, filename=filename)
    except UploadError as exc:
        assert exc.message and 400 <= exc.status < 500
    else:
        assert report.total_rows == report.valid_rows + report.invalid_rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(alphabet=st.sampled_from(list('ab@.,;\t"\n\r =xé Ж\x00')), max_size=400),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "cp1251", "utf-16"]),
)
def test_random_csv_like_text_never_crashes_the_reader(text, encoding):
    try:
        data = ("email,name,position\n" + text).encode(encoding, errors="ignore")
        report = check(data)
    except UploadError as exc:
        assert exc.message and 400 <= exc.status < 500
    else:
        assert report.total_rows == report.valid_rows + report.invalid_rows
        assert all(e.row >= 1 for e in report.errors)


GOOD_XLSX = xlsx([["email", "name", "position"], ["a@example.com", "A", "Dev"], ["b@example.com", "B", "Ops"]])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flips=st.lists(st.tuples(st.integers(0, len(GOOD_XLSX) - 1), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.integers(4, len(GOOD_XLSX)),
)
def test_damaged_workbooks_never_crash_the_reader(flips, cut):
    data = bytearray(GOOD_XLSX)
    for position, value in flips:
        data[position] = value
    try:
        report = check(bytes(data[:cut]), filename="people.xlsx")
    except UploadError as exc:
        assert exc.message and 400 <= exc.status < 500
    else:
        assert report.total_rows == report.valid_rows + report.invalid_rows


#: What a cell of a real workbook can hold (openpyxl refuses control characters in strings, as Excel does).
cells = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.datetimes(min_value=datetime(1900, 3, 1)),
    st.dates(min_value=date(1900, 3, 1)),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=60),
    st.sampled_from(["=1+1", '=HYPERLINK("http://x")', "@SUM(A1)", "#N/A", " a@example.com ", "A" * 40000]),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=st.lists(
        st.one_of(st.sampled_from(["email", "name", "position", "Email", " NAME ", ""]), cells), min_size=1, max_size=6
    ),
    rows=st.lists(st.lists(cells, max_size=7), max_size=12),
)
def test_well_formed_workbooks_with_any_cell_values_never_crash_the_reader(header, rows):
    try:
        report = check(xlsx([header, *rows]), filename="people.xlsx")
    except UploadError as exc:
        assert exc.message and 400 <= exc.status < 500
    else:
        assert report.total_rows == report.valid_rows + report.invalid_rows


# --- hostile and careless files -------------------------------------------------------------------

from bulksign.recipients import rows, workbooks  # noqa: E402
from tests.support import hostile_files  # noqa: E402

REFUSALS = {
    "whole sheet claimed": "beyond the limit of 200 columns",
    "1.5 GB of empty rows": "mostly empty space",
    "one endless row": "mostly empty space",
    "4.1 million texts": "different texts",
    "250,000 rows (xlsx)": "more than 200,000 rows",
    "250,000 rows (csv)": "more than 200,000 rows",
    "two million blank lines": "blank rows count too",
}


@pytest.mark.parametrize("name", sorted(hostile_files.HOSTILE_RECIPIENT_FILES))
def test_files_built_to_stall_the_reader_are_refused_with_what_to_do(name):
    filename, build = hostile_files.HOSTILE_RECIPIENT_FILES[name]
    with pytest.raises(UploadError) as caught:
        check(build(), filename=filename, variables=["name"])
    assert caught.value.status == 413 and REFUSALS[name] in caught.value.message


def test_a_sheet_reaching_row_1048576_is_refused_at_that_row_not_read_to_it():
    rows = hostile_files._header_and_rows(1) + ['<row r="1048576"><c r="A1048576"><v>1</v></c></row>']
    with pytest.raises(UploadError, match="reaches row 1,048,576"):
        check(hostile_files._workbook(rows, ref="A1:XFD1048576"), filename="people.xlsx", variables=["name"])


def test_empty_formatted_cells_count_against_the_cell_budget(monkeypatch):
    monkeypatch.setattr(workbooks, "MAX_CELLS", 1000)
    with pytest.raises(UploadError, match="more than 1,000 cells, empty formatted ones included"):
        check(hostile_files.wide_row_xlsx(cells=10_000), filename="people.xlsx", variables=["name"])


@pytest.mark.parametrize(
    "filename, build",
    [
        ("people.csv", lambda: hostile_files.many_rows_csv(5000)),
        ("people.xlsx", lambda: hostile_files.many_rows_xlsx(5000)),
    ],
)
def test_reading_stops_with_a_clear_message_when_it_takes_too_long(monkeypatch, filename, build):
    monkeypatch.setattr(rows, "MAX_READ_SECONDS", 0)
    with pytest.raises(UploadError, match="took longer than 0 s to read") as caught:
        check(build(), filename=filename, variables=["name"])
    assert caught.value.status == 413


def test_a_workbook_with_real_rows_reads_them_all_whatever_its_dimension_claims():
    report = check(hostile_files.many_rows_xlsx(50), filename="people.xlsx", variables=["name"])
    assert (report.total_rows, report.valid_rows) == (50, 50)


def test_a_quote_left_open_is_a_row_error_naming_its_line_not_ten_recipients_lost():
    report = check(hostile_files.stray_quote_csv(), variables=["name"])
    assert report.valid_rows == 0 and report.invalid_rows == 1
    assert (2, "name") in [(e.row, e.column) for e in report.errors]
    assert any(
        "Line 2: a quote opens here and is never closed, so the 10 lines after it" in e.message for e in report.errors
    )


def test_a_closed_quote_that_swallowed_whole_rows_is_a_row_error():
    data = b'email,name\r\na@example.com,"Ann\r\nb@example.com,Bob\r\nc@example.com,Cy"\r\nd@example.com,Dee\r\n'
    report = check(data, variables=["name"])
    assert report.valid_rows == 1
    assert [(e.row, e.column) for e in report.errors] == [(2, "name")]
    assert "Line 2: a quoted value runs over 3 lines" in report.errors[0].message


def test_a_quoted_value_with_line_breaks_and_commas_is_still_one_good_value():
    data = b'email,name,position\r\na@example.com,Ann,"Building 4,\r\nfloor 2"\r\nb@example.com,Bob,Ops\r\n'
    report = check(data, keep_rows=True)
    assert report.valid_rows == 2 and report.errors == ()
    assert report.recipients[0].data["position"] == "Building 4,\r\nfloor 2"


def test_a_nul_byte_after_the_first_64_kb_is_a_row_error_naming_the_line():
    report = check(hostile_files.late_nul_csv(), variables=["name"], keep_rows=True)
    assert report.valid_rows == 3000 and report.invalid_rows == 1
    assert [(e.row, e.column) for e in report.errors] == [(3002, "name")]
    assert "NUL character (line 3,002)" in report.errors[0].message
    assert all("\x00" not in r.name for r in report.recipients)


def test_a_shared_strings_table_beyond_the_cell_budget_is_refused_before_it_is_loaded(monkeypatch):
    report = check(hostile_files.shared_strings_xlsx(10), filename="people.xlsx", variables=["name"], keep_rows=True)
    assert [(r.email, r.name) for r in report.recipients] == [("a@example.com", "Ann")]
    monkeypatch.setattr(workbooks, "MAX_CELLS", 9)
    with pytest.raises(UploadError, match="more than 9 different texts") as caught:
        check(hostile_files.shared_strings_xlsx(10), filename="people.xlsx", variables=["name"])
    assert caught.value.status == 413


def test_row_problems_and_warnings_speak_the_staff_members_language(app):
    from flask_babel import force_locale

    report = check(b"email,name,position,notes\nb@gmial.com,B,Dev,x\n,C,Dev,y\n")
    with force_locale("ru"):
        assert [str(e.message) for e in report.errors] == [
            "Похоже, домен написан с ошибкой: может быть, b@gmail.com?",
            "Адрес почты пуст.",
        ]
        assert [str(w) for w in report.warnings] == ["Столбец «notes» не используется шаблоном и пропускается."]


def test_a_misspelt_domain_can_be_accepted_or_kept_as_written(app):
    data = b"email,name,position\nb@gmial.com,B,Dev\nc@gmial.com,C,Dev\n"
    report = check(data)
    assert typo_domains(report) == {"gmial.com": "gmail.com"} and report.valid_rows == 0
    accepted = check(data, keep_rows=True, domain_choices={"gmial.com": "gmail.com"})
    assert [r.email for r in accepted.recipients] == ["b@gmail.com", "c@gmail.com"]
    kept = check(data, keep_rows=True, domain_choices={"gmial.com": "gmial.com"})
    assert [r.email for r in kept.recipients] == ["b@gmial.com", "c@gmial.com"]
    # Any other answer is not a choice staff were offered: the question stays.
    assert check(data, domain_choices={"gmial.com": "evil.example"}).valid_rows == 0
