"""Who each party is: a row's ``<role>_email`` (``_name``, ``_phone``) columns, else the batch's fixed party; a role
with neither is an error of the file naming the role and both fixes; the routing's steps."""

from __future__ import annotations

import pytest

from bulksign.recipients.parties import PartyError, PartyPerson, fixed_parties
from bulksign.recipients.validation import validate_recipients
from bulksign.signing.parties import RoutingError, routing_steps

ROLES = ["recipient", "employer"]


def _check(text: str, **options):
    return validate_recipients(text.encode(), filename="r.csv", variables=["name"], keep_rows=True, **options)


def test_a_line_manager_per_row_comes_from_the_roles_columns_and_may_sign_many_rows():
    report = _check(
        "email,name,employer_email,employer_name,employer_phone\n"
        "a@example.com,Anna,boss@example.com,Boris Boss,+491701234567\n"
        "b@example.com,Bert,boss@example.com,Boris Boss,\n",
        roles=ROLES,
    )
    assert not report.errors and report.valid_rows == 2
    first, second = report.recipients
    assert first.parties == {"employer": PartyPerson("boss@example.com", "Boris Boss", "+491701234567")}
    assert second.parties == {"employer": PartyPerson("boss@example.com", "Boris Boss", None)}
    assert first.data == {"name": "Anna"}  # the party's columns are not the document's values
    assert not report.warnings


def test_a_bad_or_empty_address_in_a_role_column_is_a_row_error_with_its_row_and_column():
    report = _check(
        "email,name,Employer Email\na@example.com,Anna,not-an-address\nb@example.com,Bert,\nc@example.com,Cy,x@example.com\n",
        roles=ROLES,
    )
    assert [(e.row, e.column) for e in report.errors] == [(2, "Employer Email"), (3, "Employer Email")]
    assert "employer" in report.errors[1].message.english and report.valid_rows == 1


def test_a_role_with_neither_columns_nor_a_fixed_party_is_an_error_naming_the_role_and_both_fixes():
    report = _check("email,name\na@example.com,Anna\n", roles=ROLES)
    (error,) = report.errors
    assert (error.row, error.column) == (1, "employer_email") and report.valid_rows == 0
    assert "employer_email" in report.missing_columns
    message = error.message.english
    assert "as employer" in message and '"employer_email"' in message and "new-batch form" in message
    assert '"parties"' in message
    fixed = _check("email,name\na@example.com,Anna\n", roles=ROLES, fixed_roles={"employer"})
    assert not fixed.errors and fixed.valid_rows == 1 and fixed.recipients[0].parties == {}


def test_a_single_signer_file_is_checked_as_before():
    plain = _check("email,name,employer_email\na@example.com,Anna,x@example.com\n")
    assert not plain.errors and plain.recipients[0].parties == {}
    assert any("employer_email" in w.english for w in plain.warnings)  # not used by the template: ignored


def test_the_fixed_party_is_checked_role_and_address():
    assert fixed_parties('{"employer": {"email": " hr@example.com ", "name": "ACME HR"}}', roles=ROLES) == {
        "employer": PartyPerson("hr@example.com", "ACME HR", None)
    }
    assert fixed_parties(None, roles=ROLES) == {} and fixed_parties("", roles=ROLES) == {}
    refused = {
        "[1]": '"parties" must be a JSON object',
        '{"boss": {"email": "a@example.com"}}': "has no party boss; it is signed by: employer",
        '{"recipient": {"email": "a@example.com"}}': "each row's own person",
        '{"employer": {"name": "HR"}}': "Give the address of the party who signs as employer",
        '{"employer": {"email": "hr@"}}': "The party who signs as employer:",
    }
    for given, why in refused.items():
        with pytest.raises(PartyError) as caught:
            fixed_parties(given, roles=ROLES)
        assert why in caught.value.message.english, given


def test_the_routing_defaults_to_the_recipient_first_then_each_role_in_document_order():
    roles = ["employer", "recipient", "witness"]
    assert routing_steps(None, roles=roles) == {"recipient": 0, "employer": 1, "witness": 2}
    assert routing_steps('[["recipient", "employer"], ["witness"]]', roles=roles) == {
        "recipient": 0,
        "employer": 0,
        "witness": 1,
    }
    assert routing_steps(None, roles=["recipient"]) == {"recipient": 0}
    refused = {
        '[["recipient"]]': "leaves out employer, witness",
        '[["recipient", "employer"], ["employer", "witness"]]': "names employer twice",
        '[["recipient", "employer", "boss"]]': "names boss",
        '[["recipient", "employer", "witness"], []]': "JSON list of steps",
        '{"recipient": 0}': "JSON list of steps",
    }
    for given, why in refused.items():
        with pytest.raises(RoutingError) as caught:
            routing_steps(given, roles=roles)
        assert why in caught.value.message.english, given
