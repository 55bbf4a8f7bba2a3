"""The signing link as a text: the batch's language, the first name only, and within two SMS segments however long
the title (the title is shortened, never the link)."""

from __future__ import annotations

import pytest

from bulksign.mail.text_segments import Encoding, segments
from bulksign.signing.link_texts import first_name, link_text

LINK = "https://sign.example-company.com/s/" + "A" * 43
LONG_TITLE = {
    "en": "Employment contract for warehouse, retail and field staff after the merger of the two companies, annex 4",
    "ru": "Трудовой договор для сотрудников склада, розницы и выездных служб после слияния двух компаний, приложение 4",
}


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize("reminder", [False, True])
def test_a_long_title_is_shortened_so_the_text_stays_within_two_segments_and_the_link_whole(app, language, reminder):
    text = link_text(
        language=language,
        name="Иван",
        sender="Анна Кузнецова, HR",
        title=LONG_TITLE[language],
        link=LINK,
        reminder=reminder,
    )
    counted = segments(text)
    assert counted.encoding is Encoding.UCS2  # Cyrillic names and words
    assert counted.count == 2
    assert text.endswith(": " + LINK)
    assert "..." in text and LONG_TITLE[language] not in text
    # A Cyrillic name makes the text UCS-2 (134 characters in two segments), 78 of which are the link.
    assert LONG_TITLE[language][:1] in text


def test_the_russian_invitation_keeps_as_much_of_the_title_as_fits(app):
    text = link_text(language="ru", name="Иван", sender="HR", title=LONG_TITLE["ru"], link=LINK, reminder=False)
    assert text == f"Иван, HR просит подписать «Трудовой договор для со...»: {LINK}"
    assert segments(text).units == 134


def test_an_english_text_in_latin_letters_is_gsm7_and_a_short_title_is_kept_whole(app):
    text = link_text(language="en", name="John", sender="Acme HR", title="Contract", link=LINK, reminder=False)
    assert text == f'John, Acme HR asks you to sign "Contract": {LINK}'
    assert segments(text).encoding is Encoding.GSM7 and segments(text).count == 1


def test_a_link_too_long_for_any_text_is_still_sent_whole(app):
    link = "https://sign.example.com/s/" + "B" * 400
    text = link_text(language="en", name="", sender="Acme", title="Contract", link=link, reminder=False)
    assert text.endswith(link)


def test_only_the_first_name_goes_into_a_text():
    assert (first_name("Иван Петрович Сидоров"), first_name("  "), first_name("")) == ("Иван", "", "")
