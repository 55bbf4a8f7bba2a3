"""A template's parties: labels per language, colour, who signs by default, the order they sign in; saved with each
version, checked in plain words, and derived from the roles of a version saved before parties were kept."""

from __future__ import annotations

import pytest
from flask_babel import force_locale

from bulksign.core.extensions import db
from bulksign.doc_templates.template_parties import (
    PartiesError,
    PartySource,
    party_label,
    party_labels,
    template_parties,
    template_routing,
)
from bulksign.doc_templates.versions import create_template, save_fields, save_parties
from tests.support.clock import NOW

TWO_PARTIES = "<p>{{ name }}</p><p>IBAN {{ field_iban }}</p><p>{{ signature }}</p><p>{{ signature_employer }}</p>"
EMPLOYEE = {"key": "recipient", "labels": {"en": "Employee", "ru": "Работник"}, "colour": "#1F6FEB"}
EMPLOYER = {
    "key": "employer",
    "labels": {"en": "Employer", "ru": "Работодатель"},
    "colour": "#b35900",
    "source": "fixed",
    "name": "Acme HR",
    "email": "hr@acme.example",
}


def _contract(users):
    return create_template(db.session, name="Contract", html=TWO_PARTIES, user=users["staff"], now=NOW)


def test_a_version_saved_before_parties_derives_them_from_its_roles(app, users):
    version = _contract(users).version
    assert version.parties is None and version.routing is None
    parties = template_parties(version)
    assert [(p.key, p.source) for p in parties] == [("recipient", PartySource.ROW), ("employer", PartySource.COLUMNS)]
    assert party_labels(version, language="ru") == {"recipient": "Получатель", "employer": "Работодатель"}
    assert party_labels(version, language="en") == {"recipient": "Recipient", "employer": "Employer"}
    assert party_label(None, role="line_manager", language="en") == "Line manager"
    assert party_label(None, role="site_boss", language="ru") == "Site boss"
    assert template_routing(version) == [["recipient"], ["employer"]]


def test_parties_and_order_are_saved_with_a_version_and_kept_by_the_next(app, users):
    saved = _contract(users)
    version = save_parties(
        db.session,
        template=saved.template,
        parties=[EMPLOYER, EMPLOYEE],
        routing=[["employer", "recipient"]],
        user=users["staff"],
        now=NOW,
    ).version
    assert party_labels(version, language="ru") == {"employer": "Работодатель", "recipient": "Работник"}
    employer = template_parties(version)[0]
    assert (employer.source, employer.name, employer.email, employer.colour) == (
        PartySource.FIXED,
        "Acme HR",
        "hr@acme.example",
        "#b35900",
    )
    assert template_routing(version) == [["employer", "recipient"]]
    assert version.roles == ["recipient", "employer"]
    # A change of the fields keeps the parties and the order.
    fields = [{"name": "iban", "type": "text", "role": "employer"}]
    later = save_fields(db.session, template=saved.template, fields=fields, user=users["staff"], now=NOW).version
    assert later.parties == version.parties and later.routing == [["employer", "recipient"]]


def test_a_party_without_a_place_in_the_document_still_signs(app, users):
    saved = _contract(users)
    witness = {"key": "witness", "labels": {"en": "Witness"}}
    version = save_parties(
        db.session, template=saved.template, parties=[EMPLOYEE, EMPLOYER, witness], routing=None, user=None, now=NOW
    ).version
    assert version.roles == ["recipient", "employer", "witness"]
    assert template_routing(version) == [["recipient"], ["employer"], ["witness"]]
    assert party_label(version, role="witness", language="ru") == "Свидетель"


@pytest.mark.parametrize(
    ("parties", "routing", "message"),
    [
        ([{**EMPLOYER, "key": "../x"}], None, "Party 1: “../x” cannot be a party's key"),
        ([{**EMPLOYER, "key": "{{"}], None, "Party 1: “{{” cannot be a party's key"),
        ([{**EMPLOYER, "key": ""}], None, "Party 1: “” cannot be a party's key"),
        ([EMPLOYER, EMPLOYER], None, "Two parties have the key employer: each needs its own."),
        ([{"key": f"p{i}"} for i in range(50)], None, "A template may have at most 16 parties."),
        ([EMPLOYEE], None, "The document has a signature place for employer: keep a party for it"),
        ([{**EMPLOYER, "labels": {"en": "Boss\x07Man"}}], None, "The label of employer must be one line"),
        ([{**EMPLOYER, "labels": {"de": "Chef"}}], None, "A label of employer is for a language we do not know: de."),
        ([{**EMPLOYER, "colour": "red;x"}], None, "The colour of employer must be written like #1f6feb."),
        ([{**EMPLOYER, "email": "nobody"}], None, "Give the address of the one person who signs as employer"),
        ([{**EMPLOYER, "source": "row"}], None, "Only the recipient is the row's own person"),
        ([EMPLOYER], [["recipient"]], "The signing order leaves out employer: put every party in a step."),
        ([EMPLOYER], [["recipient", "employer"], ["employer"]], "The signing order has employer twice"),
        ([EMPLOYER], [["recipient"], ["../x"]], "The signing order names ../x, who is not a party."),
        ([EMPLOYER], [[]], "The signing order must be a list of steps"),
    ],
)
def test_parties_that_cannot_be_kept_are_refused_in_plain_words(app, users, parties, routing, message):
    saved = _contract(users)
    with pytest.raises(PartiesError) as refused:
        save_parties(db.session, template=saved.template, parties=parties, routing=routing, user=None, now=NOW)
    assert str(refused.value.message).startswith(message)


def test_labels_are_kept_as_text_and_an_empty_label_reads_the_default(app, users):
    saved = _contract(users)
    hostile = {**EMPLOYER, "labels": {"en": "<script>alert(1)</script>", "ru": "  "}}
    version = save_parties(
        db.session, template=saved.template, parties=[hostile], routing=None, user=None, now=NOW
    ).version
    assert party_label(version, role="employer", language="en") == "<script>alert(1)</script>"
    assert party_label(version, role="employer", language="ru") == "Работодатель"


def test_the_check_names_a_party_without_a_place_and_two_parties_called_alike_and_the_second_stops_sending(app, users):
    from bulksign.batches.batch_settings import BatchError, party_settings_from_form
    from bulksign.doc_templates.template_check import check_template

    saved = _contract(users)
    assert check_template(saved.version, language="en").errors == ()
    witness = {"key": "witness", "labels": {"en": "Witness", "ru": "Свидетель"}, "source": "fixed", "email": "w@x.org"}
    version = save_parties(
        db.session, template=saved.template, parties=[EMPLOYEE, EMPLOYER, witness], routing=None, user=None, now=NOW
    ).version
    found = check_template(version, language="ru")
    assert found.errors == ()
    with force_locale("ru"):
        warnings = [str(w) for w in found.warnings]
    assert warnings == [
        "У стороны Свидетель нет места подписи в документе: она подписывает на странице, добавленной в конце."
    ]
    party_settings_from_form({"parties": '{"employer": {"email": "b@x.org"}}'}, version=version)  # warnings: sent
    twin = {**witness, "labels": {"en": "employer", "ru": "Свидетель"}}
    version = save_parties(
        db.session, template=saved.template, parties=[EMPLOYEE, EMPLOYER, twin], routing=None, user=None, now=NOW
    ).version
    assert [str(e) for e in check_template(version, language="en").errors] == [
        "Two parties are both called “Employer”: signers could not tell them apart."
    ]
    with pytest.raises(BatchError) as refused:
        party_settings_from_form({}, version=version)
    assert refused.value.field == "template_id"
    assert str(refused.value.message) == (
        "The template is not ready to send: Two parties are both called “Employer”: signers could not tell them apart."
    )


def test_a_field_the_palette_inserted_keeps_its_type_and_party_and_a_hostile_hint_falls_back(app, users):
    html = TWO_PARTIES + "<p>{{ field_start }} {{ field_pick }} {{ field_x }}</p>"
    hints = {
        "start": {"type": "date", "role": "employer"},
        "pick": {"type": "choice", "role": "employer"},  # a choice needs options: set on the template page
        "x": {"type": "<script>", "role": "../x"},
        "iban": {"type": "number", "role": "nobody"},
    }
    version = create_template(
        db.session, name="Contract", html=html, user=users["staff"], now=NOW, field_hints=hints
    ).version
    from bulksign.doc_templates.fields import template_fields

    assert [(f.name, f.type, f.role) for f in template_fields(version)] == [
        ("iban", "number", "recipient"),
        ("start", "date", "employer"),
        ("pick", "text", "recipient"),
        ("x", "text", "recipient"),
    ]


def test_the_check_suggests_the_mark_meant_for_a_misspelt_one(app, users):
    from bulksign.doc_templates.template_check import check_template

    html = (
        "<p>{{ name }} {{ Signature }} {{ signatur_employer }} {{ Field_iban }} {{ signature_employer }} "
        "{{ salary }}</p>"
    )
    version = create_template(db.session, name="Contract", html=html, user=users["staff"], now=NOW).version
    assert [str(w) for w in check_template(version, language="en").warnings] == [
        "Recipient has no signature place in the document: they sign on a page added at the end.",
        "{{ Field_iban }} is read as a column of the file, not a mark: did you mean {{ field_iban }}?",
        "{{ Signature }} is read as a column of the file, not a mark: did you mean {{ signature }}?",
        "{{ signatur_employer }} is read as a column of the file, not a mark: did you mean {{ signature_employer }}?",
    ]
