"""A field shown and required only when another field or a row's column holds a value: checked when saved, followed
by the signing page and the server, kept out of what is stored; the API and the template page set it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from bulksign.batches.batch_settings import BatchError, party_settings_from_form
from bulksign.batches.field_values import request_values
from bulksign.core.extensions import db
from bulksign.doc_templates.columns import OPTIONAL, needed_columns
from bulksign.doc_templates.errors import FieldSettingsError
from bulksign.doc_templates.field_conditions import (
    Conditioned,
    FieldCondition,
    applying,
    check_conditions,
    checked_condition,
    holds,
)
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.versions import create_template, get_version, save_fields
from bulksign.models import utcnow
from bulksign.people.users import create_api_key
from bulksign.signing.field_entry import FilledForm, check_entries
from tests.doc_templates.test_columns import _fresh_request_state
from tests.signing.test_field_entry import PAGE, post, saved
from tests.support.clock import NOW
from tests.support.signing_requests import fresh, make_sent_request
from tests.support.web import csrf_from

FAMILY = PAGE.format(
    body="<h1>Family allowance</h1><p>Children: {{ field_children }}</p><p>Allowance: {{ field_allowance }}</p>"
    "<p>School: {{ field_school }}</p><p>{{ signature }}</p><p>{{ signature_employer }}</p>"
    "<p>Approved amount: {{ field_approved }}</p><p>Region {{ region }}</p>"
)
CHILDREN_OVER_0 = {"kind": "field", "source": "children", "operator": "greater_than", "value": "0"}
FAMILY_FIELDS = [
    {"name": "children", "type": "number", "label": "Children"},
    {"name": "allowance", "label": "Allowance account", "condition": CHILDREN_OVER_0},
    {
        "name": "school",
        "label": "School",
        "condition": {"kind": "field", "source": "allowance", "operator": "filled"},
    },
    {
        "name": "approved",
        "type": "number",
        "label": "Approved amount",
        "role": "employer",
        "condition": CHILDREN_OVER_0,
    },
]


def field(name, role="recipient", **condition):
    return Conditioned(name=name, role=role, condition=FieldCondition(**condition) if condition else None)


def on(source, kind="field", operator="filled", value=""):
    return {"kind": kind, "source": source, "operator": operator, "value": value}


ORDER = [["recipient"], ["employer"]]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ([field("a", **on("a"))], "“a” cannot be shown depending on itself."),
        ([field("a", **on("ghost"))], "the template has no such field. Its fields: a."),
        ([field("a", **on("b")), field("b", **on("a"))], "The conditions of “a”, “b” depend on each other"),
        ([field("a", **on("b")), field("b", **on("c")), field("c", **on("a"))], "“a”, “b”, “c” depend on each other"),
        # The employer signs after the recipient: the recipient's field cannot wait for the employer's.
        ([field("a", **on("b")), field("b", role="employer")], "which another party fills at the same time or later"),
    ],
)
def test_a_condition_on_itself_a_missing_field_a_circle_or_a_later_party_is_refused(fields, message):
    with pytest.raises(FieldSettingsError) as refused:
        check_conditions(fields, routing=ORDER)
    assert message in str(refused.value.message)
    assert refused.value.field == "a"


def test_a_condition_on_an_earlier_party_its_own_party_or_a_column_is_accepted():
    check_conditions(
        [
            field("a"),
            field("b", **on("a")),
            field("c", role="employer", **on("a")),
            field("d", **on("region", kind="column")),
        ],
        routing=ORDER,
    )
    # Two parties signing at the same time cannot wait for each other.
    with pytest.raises(FieldSettingsError, match="same time or later"):
        check_conditions([field("a"), field("c", role="employer", **on("a"))], routing=[["recipient", "employer"]])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (on("a", operator="contains"), "(operator)"),
        ({**on("a"), "kind": "cell"}, "(kind)"),
        ({**on("a"), "extra": 1}, "(extra)"),
        (on("a", operator="equals", value="x" * 201), "(value)"),
        (on("a" * 65), "(source)"),
        (on("a", operator="greater_than", value="many"), "give a number or a date"),
        (on("Region <b>", kind="column"), "cannot be a column of the recipients file"),
        (on("a", value="nul\x00"), "(value)"),
    ],
)
def test_a_condition_of_an_unknown_shape_or_a_huge_value_is_refused_in_words(raw, message):
    with pytest.raises(FieldSettingsError) as refused:
        checked_condition("allowance", raw)
    assert message in str(refused.value.message) and refused.value.field == "allowance"


def test_a_value_with_html_in_it_is_kept_as_text_and_compared_as_text():
    script = '<script>alert("x")</script>'
    condition = checked_condition("a", on("b", operator="equals", value=script))
    assert condition == FieldCondition(kind="field", source="b", operator="equals", value=script)
    assert holds(condition, script) and not holds(condition, "alert")
    # "is filled" compares with nothing, whatever was sent.
    assert checked_condition("a", on("b", value="ignored")).value == ""
    assert checked_condition("a", None) is None and checked_condition("a", {"source": ""}) is None


def test_numbers_compare_as_numbers_dates_as_dates_text_without_case():
    def when(operator, value):
        return FieldCondition(kind="field", source="s", operator=operator, value=value)

    assert holds(when("greater_than", "0"), "2") and not holds(when("greater_than", "0"), "0")
    assert holds(when("greater_than", "1000"), "1 234,5") and holds(when("greater_than", "1000"), "1,234.5")
    assert not holds(when("greater_than", "0"), "some") and not holds(when("greater_than", "0"), None)
    assert holds(when("greater_than", "2027-01-31"), "2027-02-01") and not holds(
        when("greater_than", "2027-01-31"), "2027-01-31"
    )
    assert holds(when("equals", "2"), "2.0") and holds(when("equals", "Yes"), " yes ")
    assert holds(when("filled", ""), "x") and not holds(when("filled", ""), "  ")


def test_a_field_depending_on_a_field_that_does_not_apply_does_not_apply_either():
    fields = [field("a"), field("b", **on("a", operator="greater_than", value="0")), field("c", **on("b"))]
    values = {"a": "0", "b": "typed anyway", "c": "x"}
    assert applying(fields, field_value=values.get, column_value=lambda c: "") == {"a"}
    values["a"] = "3"
    assert applying(fields, field_value=values.get, column_value=lambda c: "") == {"a", "b", "c"}
    by_column = [field("d", **on("region", kind="column", operator="equals", value="North"))]
    assert applying(by_column, field_value=values.get, column_value={"region": "north"}.get) == {"d"}
    assert applying(by_column, field_value=values.get, column_value=lambda c: "") == frozenset()


def family(users, *, data=None):
    sent = make_sent_request(
        now=utcnow() - timedelta(minutes=5), owner=users["staff"], html=FAMILY, fields=FAMILY_FIELDS, data=data or {}
    )
    return sent


def test_conditions_are_saved_with_the_fields_and_a_template_without_them_keeps_its_shape(app, users):
    r = fresh(family(users).id)
    fields = {f.name: f for f in template_fields(r.batch.template_version)}
    assert fields["allowance"].condition == FieldCondition(
        kind="field", source="children", operator="greater_than", value="0"
    )
    assert fields["children"].condition is None
    stored = {f["name"]: f for f in r.batch.template_version.fields}
    assert "condition" not in stored["children"] and stored["school"]["condition"]["operator"] == "filled"
    # A column a condition looks at is kept from the file, though the document need not print it.
    saved_version = save_fields(
        db.session,
        template=r.batch.template_version.template,
        fields=[{"name": "children", "condition": on("kids", kind="column", operator="greater_than", value="0")}],
        user=users["staff"],
        now=NOW,
    ).version
    assert needed_columns(saved_version)["kids"] == OPTIONAL


def test_the_server_asks_only_for_the_fields_that_apply_and_drops_the_others_values(app, users):
    r = fresh(family(users).id)

    def check(**typed):
        filled = FilledForm(typed=typed, files={}, attachment_max_bytes=0, storage=None)
        return check_entries(r, role="recipient", filled=filled)

    # No children: the allowance and the school are neither asked for nor kept, whatever was sent for them.
    none = check(children="0", allowance="<script>alert(1)</script>", school="Nr. 5")
    assert not none.errors and [(e.name, e.value) for e in none.entries] == [("children", "0")]
    # Two children: the allowance is required; once given, so is the school that depends on it.
    two = check(children="2")
    assert set(two.errors) == {"allowance"} and "it is required" in str(two.errors["allowance"])
    assert set(check(children="2", allowance="DE89").errors) == {"school"}
    assert [e.name for e in check(children="2", allowance="DE89", school="Nr. 5").entries] == [
        "children",
        "allowance",
        "school",
    ]
    # A children count that is no number: it is refused, and what depends on it waits.
    assert set(check(children="many").errors) == {"children"}


def test_a_later_party_follows_what_an_earlier_party_gave(app, users):
    r = fresh(family(users).id)
    empty = FilledForm(typed={}, files={}, attachment_max_bytes=0, storage=None)
    assert not check_entries(r, role="employer", filled=empty, earlier={"children": "0"}).errors
    asked = check_entries(r, role="employer", filled=empty, earlier={"children": "3"})
    assert set(asked.errors) == {"approved"}


def test_the_signing_page_shows_a_conditional_field_with_its_condition_and_the_post_drops_it(client, users):
    r = family(users)
    html = client.get(f"/sign/{r.token}").get_data(as_text=True)
    item = re.search(
        r'<li class="field-entry"([^>]*)>(?:(?!</li>).)*id="field-allowance"(?:(?!</li>).)*</li>', html, re.S
    )
    assert item is not None
    assert 'data-when-field="field-children" data-when-operator="greater_than" data-when-value="0"' in item.group(1)
    assert "Only when “Children” is greater than 0." in item.group(0)
    # The employer's field is not on the recipient's page.
    assert 'id="field-approved"' not in html
    # Without the page's script every field was shown and sent: the server drops what does not apply.
    answer = post(client, r.token, {"field-children": "0", "field-allowance": "typed anyway", "field-school": "x"})
    assert answer.status_code in (302, 303), answer.get_data(as_text=True)[:500]
    assert {name: v.value for name, v in saved(r.id).items()} == {"children": "0"}
    # The staff panel, exports and the sealed PDF read those rows: only the field that applied.
    assert [v.name for v in request_values(db.session, batch_id=r.batch_id, request_id=r.id)] == ["children"]


def test_a_condition_value_with_html_in_it_is_text_on_the_signing_page(client, users):
    script = '"><script>alert(1)</script>'
    fields = [{"name": "children"}, {"name": "allowance", "condition": on("children", operator="equals", value=script)}]
    r = make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"], html=FAMILY, fields=fields)
    html = client.get(f"/sign/{r.token}").get_data(as_text=True)
    assert "<script>alert(1)" not in html
    assert 'data-when-value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in html
    assert "Only when “Children” is “&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;”." in html


def test_a_field_on_a_columns_condition_is_on_the_page_only_when_the_row_holds_it(client, users):
    fields = [
        {"name": "children", "type": "number"},
        {"name": "allowance", "condition": on("region", kind="column", operator="equals", value="North")},
        {"name": "school", "required": False},
        {"name": "approved", "role": "employer"},
    ]
    now = utcnow() - timedelta(minutes=5)
    south = make_sent_request(now=now, owner=users["staff"], html=FAMILY, fields=fields, data={"region": "South"})
    assert 'id="field-allowance"' not in client.get(f"/sign/{south.token}").get_data(as_text=True)
    north = make_sent_request(now=now, owner=users["staff"], html=FAMILY, fields=fields, data={"region": "north"})
    page = client.get(f"/sign/{north.token}").get_data(as_text=True)
    assert 'id="field-allowance"' in page and "data-when-field" not in page
    refused = post(client, north.token, {"field-children": "1"})
    assert refused.status_code == 422 and "Fill in “Allowance”: it is required." in refused.get_data(as_text=True)


def test_the_api_takes_and_returns_conditions_and_describes_them(app, users, client):
    saved_template = create_template(db.session, name="Family", html=FAMILY, user=users["staff"], now=NOW)
    secret = create_api_key(db.session, user=users["staff"], name="integration", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {secret}"}
    url = f"/api/v1/templates/{saved_template.template.id}/fields"
    assert all(f["condition"] is None for f in client.get(url, headers=headers).json["fields"])
    answer = client.put(url, headers=headers, json={"fields": FAMILY_FIELDS})
    assert answer.status_code == 200, answer.json
    by_name = {f["name"]: f for f in answer.json["fields"]}
    assert by_name["allowance"]["condition"] == CHILDREN_OVER_0
    assert by_name["school"]["condition"] == {"kind": "field", "source": "allowance", "operator": "filled", "value": ""}
    circle = [{"name": "allowance", "condition": on("school")}, {"name": "school", "condition": on("allowance")}]
    for fields, message in [
        (circle, "depend on each other in a circle"),
        ([{"name": "allowance", "condition": on("allowance")}], "cannot be shown depending on itself"),
        ([{"name": "allowance", "condition": on("nobody")}], "the template has no such field"),
        ([{"name": "children", "condition": on("approved")}, {"name": "approved", "role": "employer"}], "or later"),
    ]:
        refused = client.put(url, headers=headers, json={"fields": fields})
        assert refused.status_code == 422, (fields, refused.json)
        assert refused.json["error"]["code"] == "fields_invalid"
        assert message in refused.json["error"]["message"]
    refused = client.put(
        url, headers=headers, json={"fields": [{"name": "allowance", "condition": on("x", operator="is")}]}
    )
    assert refused.status_code == 400 and "operator" in str(refused.json["error"])  # the body's shape
    spec = client.get("/api/v1/openapi.json").get_json()
    condition = spec["components"]["schemas"]["ConditionIn"]
    assert set(condition["properties"]) == {"kind", "source", "operator", "value"}
    assert condition["properties"]["operator"]["enum"] == ["filled", "equals", "greater_than"]


def test_staff_set_a_condition_on_the_template_page_and_a_circle_is_refused_there(client, users, auth):
    saved_template = create_template(db.session, name="Family", html=FAMILY, user=users["staff"], now=NOW)
    db.session.commit()
    auth.login()
    page = client.get(f"/templates/{saved_template.template.id}")
    html = page.get_data(as_text=True)
    assert '<option value="field:children">Children</option>' in html
    assert 'value="column:region"' in html and 'name="allowance-when-operator"' in html
    form = {"csrf_token": csrf_from(page)}
    for f in template_fields(saved_template.version):
        form.update({f"{f.name}-type": f.type, f"{f.name}-role": f.role, f"{f.name}-required": "1"})
    form.update({"approved-role": "employer", "children-type": "number"})
    form.update(
        {
            "allowance-when-source": "field:children",
            "allowance-when-operator": "greater_than",
            "allowance-when-value": "0",
        }
    )
    answer = client.post(f"/templates/{saved_template.template.id}/fields", data=form)
    assert answer.status_code == 302
    newest = get_version(db.session, template_id=saved_template.template.id)
    allowance = next(f for f in template_fields(newest) if f.name == "allowance")
    assert allowance.condition == FieldCondition(kind="field", source="children", operator="greater_than", value="0")
    html = client.get(f"/templates/{saved_template.template.id}").get_data(as_text=True)
    assert re.search(r'<option value="field:children" selected>', html)
    form.update({"csrf_token": csrf_from(client.get(f"/templates/{saved_template.template.id}"))})
    form.update({"children-when-source": "field:allowance", "children-when-operator": "filled"})
    refused = client.post(f"/templates/{saved_template.template.id}/fields", data=form)
    text = refused.get_data(as_text=True)
    assert refused.status_code == 422 and "depend on each other in a circle" in text
    # The refused choice stays as staff made it.
    assert re.search(
        r'name="children-when-source">(?:(?!</select>).)*<option value="field:allowance" selected>', text, re.S
    )


def test_a_batchs_own_order_that_puts_a_fields_source_later_is_refused(app, users):
    version = fresh(family(users).id).batch.template_version
    fixed = '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"}}'
    assert party_settings_from_form({"parties": fixed}, version=version).steps == {"recipient": 0, "employer": 1}
    with pytest.raises(BatchError) as refused:
        party_settings_from_form({"parties": fixed, "routing": '[["employer"], ["recipient"]]'}, version=version)
    assert refused.value.field == "routing"
    assert "“approved” depends on “children”, which another party fills at the same time or later" in str(
        refused.value.message
    )


def test_the_condition_lists_read_in_russian(client, users, auth):
    saved_template = create_template(db.session, name="Family", html=FAMILY, user=users["staff"], now=NOW)
    auth.login()
    users["staff"].locale = "ru"
    db.session.commit()
    _fresh_request_state()
    html = client.get(f"/templates/{saved_template.template.id}").get_data(as_text=True)
    assert "<legend>Когда поле показывается и запрашивается</legend>" in html
    assert '<option value="">Всегда</option>' in html and '<optgroup label="Только по этому полю">' in html
    assert '<option value="greater_than">больше</option>' in html
