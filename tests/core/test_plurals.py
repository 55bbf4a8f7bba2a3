"""Counts read right in both languages (issue 33, item 22): "1 signed document", "2 signed documents"; in Russian the
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
