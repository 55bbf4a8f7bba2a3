"""The soak's template of each kind, created over the API, and its recipients file: every row valid (bench/soak.py)."""

from __future__ import annotations

import io
import json

import pytest
from sqlalchemy import select

from bench.soak import COUNTERSIGNER, KINDS, recipients_csv, template_request
from bulksign.core.extensions import db
from bulksign.recipients.validation import validate_recipients
from tests.support.clock import NOW


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_makes_a_template_whose_variables_the_recipients_file_fills(client, users, kind):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    sent = template_request(kind)
    if "files" in sent:  # requests' multipart arguments, as Flask's test client takes them
        filename, data, _ = sent["files"]["file"]
        sent = {"content_type": "multipart/form-data", "data": {**sent["data"], "file": (io.BytesIO(data), filename)}}
    created = client.post("/api/v1/templates", headers={"Authorization": f"Bearer {key}"}, **sent)
    assert created.status_code == 201, created.json
    assert created.json["kind"] == kind and len(created.json["variables"]) >= 3
    report = validate_recipients(
        recipients_csv(created.json["variables"], 5), filename="recipients.csv", variables=created.json["variables"]
    )
    assert (report.valid_rows, report.error_count, report.missing_columns) == (5, 0, ())


def test_the_two_party_act_marks_the_recipient_and_the_employer_whom_the_fixed_party_fills(client, users):
    from bulksign.batches.batch_settings import party_settings_from_form
    from bulksign.models import TemplateVersion
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    created = client.post(
        "/api/v1/templates", headers={"Authorization": f"Bearer {key}"}, **template_request("html", parties=True)
    )
    assert created.status_code == 201, created.json
    assert created.json["roles"] == ["recipient", "employer"]
    version = db.session.scalar(select(TemplateVersion).where(TemplateVersion.template_id == created.json["id"]))
    signers = party_settings_from_form({"parties": json.dumps({"employer": COUNTERSIGNER})}, version=version)
    report = validate_recipients(
        recipients_csv(created.json["variables"], 5),
        filename="recipients.csv",
        variables=created.json["variables"],
        **signers.file_check,
    )
    assert (report.valid_rows, report.error_count, report.missing_columns) == (5, 0, ())


def test_with_a_share_of_rows_by_text_every_row_is_valid_and_that_share_has_no_address():
    from bench.soak import SoakConfig
    from bulksign.recipients.row_checks import PhoneRule

    variables = ["name", "amount"]
    report = validate_recipients(
        recipients_csv(variables, 10, sms_share=0.3),
        filename="recipients.csv",
        variables=variables,
        keep_rows=True,
        phones=PhoneRule(region="RU", without_address=True),
    )
    assert (report.valid_rows, report.error_count, report.text_only_rows) == (10, 0, 3)
    assert SoakConfig(recipients=10, sms_share=0.3).texted_rows == 3
