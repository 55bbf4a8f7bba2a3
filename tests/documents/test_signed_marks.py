"""The palette's "date signed" and "signer's name": fields filled in for a party when they sign, never asked of them,
printed in the sealed PDF in their boxes with that party's signing day (in the batch's language and time zone) and
the name they signed with."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.errors import FieldSettingsError
from bulksign.documents.signature_box import SignatureBox
from bulksign.models import Party, SigningRequest, utcnow
from bulksign.signing.field_entry import form_fields, signed_entries
from bulksign.signing.page_states import signer_party
from tests.documents.test_filled_fields import PAGE, _document, _sent, _signed, _text, _version, _words_in
from tests.support.clock import NOW
from tests.support.form_signing import sign_filled

SIGNED = PAGE.format(
    body="<h1>Трудовой договор</h1><p>Работник {{ name }}. Паспорт: {{ field_passport }}</p>"
    "<p>{{ signature }}</p><p>Подписал: {{ field_signer_name_recipient }} {{ field_signed_date_recipient }}</p>"
    "<p>{{ signature_employer }}</p><p>За работодателя: {{ field_signer_name_employer }}"
    " {{ field_signed_date_employer }}</p>"
)
FIELDS = [
    {"name": "passport", "label": "Паспорт"},
    {"name": "signer_name_recipient", "type": "signer_name", "label": "Работник"},
    {"name": "signed_date_recipient", "type": "signed_date", "label": "Дата подписи работника"},
    {"name": "signer_name_employer", "type": "signer_name", "role": "employer", "label": "Работодатель"},
    {"name": "signed_date_employer", "type": "signed_date", "role": "employer", "label": "Дата подписи"},
]


def test_each_partys_date_signed_and_name_are_printed_in_their_boxes_when_they_sign(app, users, run_jobs, tmp_path):
    version = _version(users, fields=FIELDS, html=SIGNED)
    (request_id,) = _sent(
        users,
        run_jobs,
        version,
        rows="email,name\neva@example.com,Ева Иванова\n",
        form={"parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"}}'},
        language="ru",
        timezone="Pacific/Kiritimati",  # UTC+14: its day is often not UTC's
    )
    request = db.session.get(SigningRequest, request_id)
    # The employee is asked only for her passport number: the rest is filled in for her.
    shown = form_fields(request, role="recipient", document=None, pages=None)
    assert [f.settings.name for f in shown] == ["passport"]
    sign_filled(
        request_id, "Ева Иванова", party=signer_party(db.session, request, None), typed={"passport": "4510 123456"}
    )
    run_jobs("pdf", "mail")
    employer = db.session.scalars(select(Party).where(Party.request_id == request_id, Party.role == "employer")).one()
    sign_filled(request_id, "Анна Босс", party=employer)
    run_jobs("pdf", "mail")

    boxes = {n: SignatureBox.from_json(b) for n, b in _document(request_id, "original").field_boxes.items()}
    signed = _signed(request_id)
    day = utcnow().astimezone(ZoneInfo("Pacific/Kiritimati")).date()
    written = f"{day.day} {_MONTHS[day.month - 1]} {day.year} г."
    assert " ".join(_words_in(signed, tmp_path, boxes["signer_name_recipient"])) == "Ева Иванова"
    assert " ".join(_words_in(signed, tmp_path, boxes["signed_date_recipient"])) == written
    assert " ".join(_words_in(signed, tmp_path, boxes["signer_name_employer"])) == "Анна Босс"
    assert " ".join(_words_in(signed, tmp_path, boxes["signed_date_employer"])) == written
    text = _text(signed, tmp_path)
    assert f"Дата подписи {written} Работодатель: Anna Boss <hr@acme.example>" in text  # and on the certificate


def test_the_signers_name_is_the_one_they_signed_with_and_the_day_is_the_batchs(app, users, run_jobs):
    version = _version(users, fields=FIELDS, html=SIGNED)
    (request_id,) = _sent(
        users,
        run_jobs,
        version,
        rows="email,name\neva@example.com,Eva\n",
        form={"parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"}}'},
        timezone="Asia/Tokyo",
    )
    request = db.session.get(SigningRequest, request_id)
    late = datetime(2026, 12, 6, 16, 30, tzinfo=NOW.tzinfo)  # 01:30 the next day in Tokyo
    entries = signed_entries(request, role="recipient", signer_name="Eva Typed", now=late)
    assert [(e.name, e.value) for e in entries] == [
        ("signer_name_recipient", "Eva Typed"),
        ("signed_date_recipient", "2026-12-07"),
    ]


_MONTHS = ("января февраля марта апреля мая июня июля августа сентября октября ноября декабря").split()


def test_a_condition_on_or_of_a_field_filled_in_at_signing_is_refused(app, users):
    on_name = {"kind": "field", "source": "signer_name_recipient", "operator": "filled", "value": ""}
    on_passport = {"kind": "field", "source": "passport", "operator": "filled", "value": ""}
    for fields in (
        [{**FIELDS[0], "condition": on_name}, *FIELDS[1:]],
        [FIELDS[0], {**FIELDS[1], "condition": on_passport}, *FIELDS[2:]],
    ):
        with pytest.raises(FieldSettingsError, match="cannot be waited on"):
            _version(users, fields=fields, html=SIGNED)
        db.session.rollback()


def test_the_template_page_offers_no_condition_on_or_of_a_field_filled_in_at_signing(client, users, auth):
    version = _version(users, fields=FIELDS, html=SIGNED)
    db.session.commit()
    auth.login()
    html = client.get(f"/templates/{version.template_id}").get_data(as_text=True)
    assert 'name="passport-when-source"' in html and 'name="signer_name_recipient-when-source"' not in html
    assert 'value="field:passport"' not in html  # the only field that could be a source is the passport's own
    assert 'value="field:signer_name_recipient"' not in html and 'value="field:signed_date_employer"' not in html
