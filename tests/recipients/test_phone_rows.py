"""Rows reached by text: phones checked and written in E.164, a phone standing in for the address when the batch's
channel allows it, and every bad number a row error naming its row and column."""

from __future__ import annotations

import pytest

from bulksign.batches.batch_settings import BatchError, settings_from_form
from bulksign.models.batches import Reach
from bulksign.recipients.row_checks import PhoneRule
from bulksign.recipients.validation import validate_recipients

RU_TEXTS = PhoneRule(region="RU", without_address=True)


def check(text: str, *, phones: PhoneRule | None = RU_TEXTS):
    return validate_recipients(text.encode(), filename="people.csv", variables=["name"], keep_rows=True, phones=phones)


def errors(report) -> list[tuple[int, str, str]]:
    return [(e.row, e.column, str(e.message)) for e in report.errors]


def test_a_row_with_a_phone_and_no_address_is_valid_and_its_number_written_in_e164():
    report = check(
        "email,name,phone\n"
        ",Иван,+7 (999) 123-45-67\n"
        ",Пётр,8 999 123 45 68\n"
        "anna@example.com,Анна,\n"
        "olga@example.com,Ольга,+49 170 1234567\n"
    )
    assert errors(report) == []
    assert [(r.email, r.phone) for r in report.recipients] == [
        ("", "+79991234567"),
        ("", "+79991234568"),
        ("anna@example.com", None),
        ("olga@example.com", "+491701234567"),
    ]
    assert (report.phone_rows, report.text_only_rows) == (3, 2)


def test_a_file_with_phones_needs_no_email_column_when_texts_stand_in():
    report = check("name,phone\nИван,+79991234567\n")
    assert errors(report) == [] and report.recipients[0].phone == "+79991234567"


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("call me", "The phone number may hold digits, spaces, brackets, dashes and a leading + only."),
        ("+7 999 ABC 45 67", "The phone number may hold digits, spaces, brackets, dashes and a leading + only."),
        ("12", "12 is not a valid phone number (read in RU; write it with +country code if it is from elsewhere)."),
        ("+" + "9" * 41, "The phone number is too long: 42 characters."),
        ("++--", "This is not a phone number: ++--."),
    ],
)
def test_a_bad_number_is_an_error_on_its_row_and_column(written, message):
    report = check(f"email,name,Mobile\nanna@example.com,Анна,ok\n,Иван,{written}\n".replace(",ok", ",+79991234567"))
    # The file's own header names the column; a formula-like value is not mistaken for a number.
    assert errors(report) == [(3, "Mobile", message)]
    assert report.valid_rows == 1


def test_neither_address_nor_phone_is_an_error_saying_both_are_missing():
    report = check("email,name,phone\n,Иван,\n")
    assert errors(report) == [(2, "email", "The email address is empty, and so is the phone: give one of them.")]


def test_the_same_phone_on_two_rows_without_address_is_a_duplicate():
    report = check("email,name,phone\n,Иван,+79991234567\n,Пётр,8 (999) 123-45-67\n")
    assert errors(report) == [(3, "phone", "Duplicate phone: +79991234567 is already on row 2.")]


def test_a_batch_that_only_mails_still_needs_every_address_and_keeps_phones_as_written():
    report = check("email,name,phone\n,Иван,+79991234567\nanna@example.com,Анна,8 999 123 45 67\n", phones=None)
    assert errors(report) == [(2, "email", "The email address is empty.")]
    assert report.recipients[0].phone == "8 999 123 45 67"


def test_texts_on_bounce_check_phones_but_every_row_needs_its_address():
    report = check("email,name,phone\n,Иван,+79991234567\n", phones=PhoneRule(region="RU", without_address=False))
    assert errors(report) == [(2, "email", "The email address is empty.")]


def test_the_channel_and_the_text_cap_are_read_from_the_form():
    settings = settings_from_form({"channel": "text_both", "text_cap": "250"}, default_name="b")
    assert (settings.reach, settings.text_cap) == (Reach.TEXT_BOTH, 250)
    assert settings.texts_allowed(phone_rows=1000) == 250
    default = settings_from_form(
        {"channel": "text_without_address", "max_reminders": "2", "reminder_days": "2,4"}, default_name="b"
    )
    # An invitation and each reminder per row with a phone, unless staff set a cap.
    assert default.texts_allowed(phone_rows=10) == 30
    assert settings_from_form({}, default_name="b").texts_allowed(phone_rows=10) == 0
    with pytest.raises(BatchError) as refused:
        settings_from_form({"channel": "pigeon"}, default_name="b")
    assert refused.value.field == "channel"
    with pytest.raises(BatchError) as refused:
        settings_from_form({"channel": "text_both", "text_cap": "-1"}, default_name="b")
    assert refused.value.field == "text_cap"
