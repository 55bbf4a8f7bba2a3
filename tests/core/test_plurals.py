"""Counts read right in both languages: "1 signed document", "2 signed documents"; in Russian the
three forms, "1 документ / 2 документа / 5 документов / 21 документ", in a page partial and a mail."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from flask import render_template
from flask_babel import force_locale

#: count → what each place says, by language.
EXPECTED = {
    "en": {
        "zip": {
            1: "(1 signed document)",
            2: "(2 signed documents)",
            5: "(5 signed documents)",
            21: "(21 signed documents)",
        },
        "building": {1: "0 of 1 document<", 2: "0 of 2 documents<", 5: "0 of 5 documents<", 21: "0 of 21 documents<"},
        "code": {
            1: "valid for 1 minute and",
            2: "valid for 2 minutes",
            5: "valid for 5 minutes",
            21: "valid for 21 minutes",
        },
    },
    "ru": {
        "zip": {
            1: "(1 подписанный документ)",
            2: "(2 подписанных документа)",
            5: "(5 подписанных документов)",
            21: "(21 подписанный документ)",
        },
        "building": {1: "из 1 документа<", 2: "из 2 документов<", 5: "из 5 документов<", 21: "из 21 документа<"},
        "code": {1: "действует 1 минуту", 2: "действует 2 минуты", 5: "действует 5 минут", 21: "действует 21 минуту"},
    },
}


def _export(app, *, status: str, total: int) -> str:
    export = SimpleNamespace(id=1, status=status, total=total, done=0, error=None)
    return render_template("batches/_export.html", export=export, batch_id=1)


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize("count", [1, 2, 5, 21])
def test_counts_take_their_plural_form(app, language, count):
    expected = EXPECTED[language]
    with app.test_request_context("/"), force_locale(language):
        ready = _export(app, status="ready", total=count)
        building = _export(app, status="running", total=count)
        code_mail = render_template(
            "emails/one_time_code_email.txt",
            request=SimpleNamespace(name="Anna", email="anna@example.com"),
            document="Offer letter",
            code="123456",
            minutes=count,
        )
    assert expected["zip"][count] in ready, ready
    assert expected["building"][count] in building, building
    assert expected["code"][count] in code_mail, code_mail


#: A count in a message a person reads when something is refused (``N_plural``): the form follows the count.
TOO_MANY = {
    "en": {
        1: "This row has 2 values but the header has 1 column.",
        3: "This row has 4 values but the header has 3 columns.",
        5: "This row has 6 values but the header has 5 columns.",
        21: "This row has 22 values but the header has 21 columns.",
    },
    "ru": {
        1: "В этой строке 2 значения, а в заголовке — 1 столбец.",
        3: "В этой строке 4 значения, а в заголовке — 3 столбца.",
        5: "В этой строке 6 значений, а в заголовке — 5 столбцов.",
        21: "В этой строке 22 значения, а в заголовке — 21 столбец.",
    },
}
TOO_LONG = {
    "en": {
        1: "at least 1 character.",
        3: "at least 3 characters.",
        5: "at least 5 characters.",
        21: "at least 21 characters.",
    },
    "ru": {
        1: "не короче 1 символа.",
        3: "не короче 3 символов.",
        5: "не короче 5 символов.",
        21: "не короче 21 символа.",
    },
}


def _too_many_values(columns: int) -> str:
    """What checking a file whose header has ``columns`` columns says of a row with one value more."""
    from bulksign.recipients.validation import validate_recipients

    header = ",".join(["email", *(f"c{i}" for i in range(1, columns))])
    row = ",".join(["anna@example.com", *("x" for _ in range(columns))])
    report = validate_recipients(f"{header}\n{row}\n".encode(), filename="people.csv", variables=[])
    (error,) = report.errors
    return str(error.message)


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize("count", [1, 3, 5, 21])
def test_refusals_with_a_count_take_its_plural_form(app, language, count):
    from bulksign.core.messages import N_plural

    with app.test_request_context("/"), force_locale(language):
        told = _too_many_values(count)
        password = str(
            N_plural(
                "The password must have at least %(num)s character.",
                "The password must have at least %(num)s characters.",
                count,
            )
        )
    assert TOO_MANY[language][count] in told, told
    assert TOO_LONG[language][count] in password, password


def test_a_left_out_rows_reason_with_counts_reads_in_the_readers_language_from_the_stored_row(app, users):
    """The reason is stored at creation and read later, in whoever downloads it's language: counts and all."""
    from bulksign.batches.skipped_rows import keep_skipped_rows, skipped_rows_csv
    from bulksign.core.extensions import db
    from bulksign.recipients.validation import validate_recipients
    from tests.support.clock import NOW
    from tests.support.waiting import sent_batch

    batch_id, _ = sent_batch(user=users["staff"], sent_at=NOW)
    with app.test_request_context("/"), force_locale("ru"):
        report = validate_recipients(b"email,c1\nanna@example.com,x,y\n", filename="people.csv", variables=[])
        keep_skipped_rows(db.session, batch_id=batch_id, errors=report.errors, kept_rows=set())
        db.session.commit()
        russian = "".join(skipped_rows_csv(db.session, batch_id=batch_id))
    with app.test_request_context("/"), force_locale("en"):
        english = "".join(skipped_rows_csv(db.session, batch_id=batch_id))
    assert "В этой строке 3 значения, а в заголовке — 2 столбца." in russian, russian
    assert "This row has 3 values but the header has 2 columns." in english, english


def test_a_count_message_reads_and_compares_in_english_like_its_text_outside_any_request():
    """Logs, the API's English field and tests read ``english``: it picks the form by the count too."""
    from bulksign.core.messages import N_, N_plural

    message = N_(
        "This row has %(values)s but the header has %(columns)s.",
        values=N_plural("%(num)s value", "%(num)s values", 1),
        columns=N_plural("%(num)s column", "%(num)s columns", 21),
    )
    assert message.english == "This row has 1 value but the header has 21 columns."
    assert message == "This row has 1 value but the header has 21 columns."
    assert N_plural("%(num)s value", "%(num)s values", 3) == N_plural("%(num)s value", "%(num)s values", 3)
    assert N_plural("%(num)s value", "%(num)s values", 3) != N_plural("%(num)s value", "%(num)s values", 4)
