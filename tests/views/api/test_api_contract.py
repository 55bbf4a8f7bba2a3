"""The API's description is its contract: generated from the views, fuzzed by Schemathesis against the live app.

``test_schemathesis_against_the_live_app`` runs the outside fuzzer (``st run``) on every operation with
a real admin key and real data: no 5xx, every answer matches the description. Then every documented
status must have been seen, by the fuzzer or by the short scripted tour after it (the statuses random
data does not reach: a viewer's 403, an idempotency conflict, an oversized file, a rate limit), whose
answers are checked against the same description. ``API_FUZZ_SECONDS`` makes the run longer
(``make api-fuzz``).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
import referencing
from openapi_spec_validator import validate as validate_openapi
from sqlalchemy import func, select, update

from bulksign.batches.retention import purge_requests
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.documents.storage import get_storage
from bulksign.integrations import idempotency
from bulksign.jobs.exports import signed_zip
from bulksign.jobs.seal import seal
from bulksign.models import ApiKey, Batch, Document, Export, IdempotencyKey, SigningRequest, Team, utcnow
from bulksign.models.status import BatchStatus
from bulksign.people.teams import add_member
from bulksign.people.users import create_api_key, create_user
from bulksign.recipients.suppressions import suppress
from bulksign.views.api.docs import _api_rules, build_spec
from tests.support.batches import make_batch
from tests.support.clock import NOW
from tests.support.field_values import fill, scan_png
from tests.support.looks import ARTIFACTS, WIDTHS
from tests.support.pdf_files import plain_pdf
from tests.support.sealed import signed_request
from tests.views.api.corrections_tour import tour_corrections

CSV = b"email,name,salary\nanna@example.com,Anna,1000\njohn@example.com,John,2000\n"
ST = str(Path(sys.executable).with_name("st"))
#: Statuses a schema-valid request may still get: business refusals the schema cannot express (a file that is
#: not CSV, an unknown cursor, a state that forbids the action, a request's files purged) — never a 400 (that is
#: for malformed input).
ACCEPTABLE_FOR_VALID_DATA = "2xx,401,403,404,409,410,413,415,422,429"


def _key(user) -> dict:
    secret = create_api_key(db.session, user=user, name="contract", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def test_every_api_route_is_declared_and_the_description_is_valid_openapi_3_1(app, client):
    assert [rule.rule for rule, op in _api_rules(app) if op is None] == []
    spec = client.get("/api/v1/openapi.json").get_json()
    validate_openapi(spec)
    assert spec["openapi"] == "3.1.0" and spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    operations = [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]
    assert len(operations) == len([1 for rule, _ in _api_rules(app) for m in rule.methods - {"HEAD", "OPTIONS"}])
    for path, method, op in operations:
        assert {"401", "429"} <= set(op["responses"]), (method, path)
        # Every POST that creates or sends something; checking a file, correcting an address and erasing a person
        # (called again, it erases nothing twice) create nothing.
        if method == "post" and path not in ("/requests/{request_id}/email", "/batches/validate", "/privacy/erasures"):
            assert "Idempotency-Key" in [p["name"] for p in op["parameters"]], path
        if method == "get" and "items" in json.dumps(op["responses"]["200"]):
            names = {p["name"] for p in op["parameters"]}
            assert {"cursor", "limit"} <= names, path  # every list pages the same way
    delivery = spec["webhooks"]["request.signed"]["post"]
    assert delivery["parameters"][0]["name"] == "X-Bulksign-Signature"
    assert client.get("/api/v1/openapi.json").headers["Content-Type"] == "application/json"


def test_errors_have_one_shape_everywhere(app, client, users):
    headers = _key(users["staff"])
    for response in (
        client.get("/api/v1/me"),
        client.get("/api/v1/batches/999", headers=headers),
        client.get("/api/v1/batches/-1", headers=headers),
        client.get("/api/v1/nothing", headers=headers),
        client.get("/api/v1/batches?limit=0", headers=headers),
        client.post("/api/v1/templates", data="x", headers=headers),
    ):
        body = response.get_json()
        assert response.status_code >= 400 and set(body) == {"error"}, body
        assert set(body["error"]) == {"code", "message", "details"} and body["error"]["message"], body


def test_idempotency_key_replays_refuses_another_body_and_waits_for_a_running_call(app, client, users):
    headers = {**_key(users["staff"]), "Idempotency-Key": "tpl-1"}
    first = client.post("/api/v1/templates", json={"name": "A", "html": "<p>{{ name }}</p>"}, headers=headers)
    again = client.post("/api/v1/templates", json={"html": "<p>{{ name }}</p>", "name": "A"}, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201) and first.json == again.json
    assert again.headers["Idempotent-Replayed"] == "true"
    other = client.post("/api/v1/templates", json={"name": "B", "html": "<p>x</p>"}, headers=headers)
    assert other.status_code == 422 and other.json["error"]["code"] == "idempotency_key_reused"
    # The same key of another API key is another key.
    mine = {**_key(users["staff"]), "Idempotency-Key": "tpl-1"}
    assert client.post("/api/v1/templates", json={"name": "B", "html": "<p>x</p>"}, headers=mine).status_code == 201
    # A call still running holds its key (409); one abandoned (its process died) frees it after a while.
    running = IdempotencyKey(
        api_key_id=db.session.scalar(select(func.max(IdempotencyKey.api_key_id))),
        key="run",
        fingerprint="x",
        created_at=utcnow(),
        expires_at=utcnow() + idempotency.TTL,
    )
    db.session.add(running)
    db.session.commit()
    busy = client.post(
        "/api/v1/templates", json={"name": "C", "html": "<p>x</p>"}, headers={**mine, "Idempotency-Key": "run"}
    )
    assert busy.status_code == 409 and busy.json["error"]["code"] == "idempotency_key_in_use"
    # Expired keys are forgotten by the periodic job.
    later = utcnow() + idempotency.TTL + timedelta(seconds=1)
    assert idempotency.purge_expired(db.session, now=later) == 3
    db.session.commit()
    assert db.session.scalar(select(func.count()).select_from(IdempotencyKey)) == 0


def test_rate_limit_is_per_api_key_with_429_and_retry_after(make_app, users):
    app = make_app(API_RATE_LIMIT="3 per minute")
    client = app.test_client()
    with app.app_context():
        from bulksign.models import User

        user = db.session.scalar(select(User).where(User.email == users["staff"].email))
        first, second = _key(user), _key(user)
    answers = [client.get("/api/v1/me", headers=first) for _ in range(4)]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    # Only the refusal says when to come back; an answer that went through has nothing to retry.
    assert [answer.headers.get("Retry-After") is not None for answer in answers] == [False, False, False, True]
    limited = client.get("/api/v1/me", headers=first)
    assert limited.json["error"]["code"] == "rate_limited" and 0 < int(limited.headers["Retry-After"]) <= 60
    assert client.get("/api/v1/me", headers=second).status_code == 200  # another key, its own budget


def test_the_docs_page_renders_every_operation_under_the_strict_csp(live_server, page):
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    response = page.goto(live_server + "/api/docs")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".opblock-summary-path", timeout=60_000)  # 1.7 MB of script on a busy machine
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/batches/{batch_id}/requests" in [p.replace("\u200b", "") for p in paths]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(ARTIFACTS / f"api-docs-{width}.png"), full_page=True)
    assert problems == []


# --- the fuzzer --------------------------------------------------------------------------------------


@pytest.fixture
def world(app, users):
    """An admin key over real data: a template the file fits, a batch with requests, a suppressed address."""
    admin = users["admin"]
    template = create_template(
        db.session, name="Contract", html="<p>{{ name }} {{ salary }}</p>", user=admin, now=NOW
    ).template
    batch_id = make_batch(now=NOW, user=admin, recipients=3)
    suppress(db.session, email="gone@example.com", source="bounce", reason="550 5.1.1 no such user", now=NOW)
    db.session.commit()
    # A request signed through the real steps and sealed: the fuzzer downloads its documents too.
    signed_id = signed_request(owner=admin, image=False).id
    assert seal(signed_id).status == "sealed"
    return {
        "headers": _key(admin),
        "template_id": template.id,
        "batch_id": batch_id,
        "admin": admin,
        "staff": users["staff"],
        "signed_id": signed_id,
    }


def _operation_of(spec: dict, method: str, url: str) -> str | None:
    path = re.sub(r"^https?://[^/]+/api/v1", "", url).split("?")[0]
    candidates = sorted(spec["paths"], key=lambda p: p.count("{"))  # literal paths before templated ones
    for template in candidates:
        if method in spec["paths"][template] and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
            return f"{method.upper()} {template}"
    return None


def _documented(spec: dict) -> set[tuple[str, str]]:
    return {
        (f"{method.upper()} {path}", status)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        for status in op["responses"]
    }


def _validator(spec: dict):
    """Checks one answer against the description (its status documented, its JSON matching the schema)."""
    registry = referencing.Registry().with_resource(
        "urn:api", referencing.Resource.from_contents(spec, default_specification=referencing.jsonschema.DRAFT202012)
    )

    def check(label: str, response) -> None:
        method, path = label.split(" ", 1)
        documented = spec["paths"][path][method.lower()]["responses"]
        assert str(response.status_code) in documented, (label, response.status_code, response.get_data(True)[:300])
        answer = documented[str(response.status_code)]
        if "$ref" in answer:
            answer = spec["components"]["responses"][answer["$ref"].rsplit("/", 1)[1]]
        for header, about in answer.get("headers", {}).items():
            assert not about.get("required") or header in response.headers, (label, header)
        media = answer["content"]
        if "application/json" in media:
            schema = media["application/json"]["schema"]
            jsonschema.Draft202012Validator({"$ref": "urn:api" + schema["$ref"]}, registry=registry).validate(
                response.get_json()
            )
        else:
            assert response.mimetype in media, (label, response.mimetype)

    return check


def _tour(app, world, spec) -> set[tuple[str, str]]:
    """The statuses random data does not reach, each reached on purpose and checked against the description."""
    client = app.test_client()
    check, seen = _validator(spec), set()
    admin = world["headers"]
    reader = create_user(db.session, email="viewer@example.com", password="viewer-password", role="viewer", now=NOW)
    add_member(db.session, team=db.session.scalar(select(Team)), user=reader, by=None, now=NOW)
    viewer = _key(reader)  # sees the team's batches and templates, changes nothing
    batch = world["batch_id"]

    def call(label, method, url, expected, **kwargs):
        response = client.open("/api/v1" + url, method=method, **kwargs)
        assert response.status_code == expected, (label, response.status_code, response.get_data(True)[:300])
        check(label, response)
        seen.add((label, str(expected)))
        return response

    def upload(**fields):
        return {
            "data": {"template_id": str(world["template_id"]), "file": (io.BytesIO(CSV), "r.csv"), **fields},
            "content_type": "multipart/form-data",
        }

    call("GET /me", "GET", "/me", 200, headers=admin)
    call("GET /me", "GET", "/me", 401)
    created = call("POST /batches", "POST", "/batches", 201, headers={**admin, "Idempotency-Key": "k1"}, **upload())
    new_batch = created.json["id"]
    call("POST /batches", "POST", "/batches", 422, headers={**admin, "Idempotency-Key": "k1"}, **upload(name="B"))
    call(
        "POST /batches",
        "POST",
        "/batches",
        404,
        headers=admin,
        **{**upload(), "data": {**upload()["data"], "template_id": "999999"}},
    )
    call(
        "POST /batches",
        "POST",
        "/batches",
        415,
        headers=admin,
        **{**upload(), "data": {**upload()["data"], "file": (io.BytesIO(CSV), "r.exe")}},
    )
    call("POST /batches", "POST", "/batches", 403, headers=viewer, **upload())
    call("POST /batches/validate", "POST", "/batches/validate", 200, headers=admin, **upload())
    call("GET /batches/{batch_id}/requests", "GET", f"/batches/{new_batch}/requests?limit=1", 200, headers=admin)
    call("GET /batches/{batch_id}/export.csv", "GET", f"/batches/{new_batch}/export.csv", 200, headers=admin)
    call("GET /batches", "GET", "/batches?cursor=bm9wZQ", 422, headers=admin)
    call("GET /templates", "GET", "/templates?cursor=bm9wZQ", 422, headers=admin)
    call("GET /suppressions", "GET", "/suppressions?cursor=bm9wZQ", 422, headers=admin)
    call("GET /batches/{batch_id}/requests", "GET", f"/batches/{batch}/requests?cursor=bm9wZQ", 422, headers=admin)
    call("POST /batches/{batch_id}/cancel", "POST", f"/batches/{batch}/cancel", 403, headers=viewer)
    digests = "POST /batches/{batch_id}/countersign-digests"
    call(digests, "POST", f"/batches/{batch}/countersign-digests", 403, headers=viewer)
    call("POST /batches/{batch_id}/cancel", "POST", f"/batches/{batch}/cancel", 202, headers=admin)
    call("POST /batches/{batch_id}/retry-failed", "POST", f"/batches/{batch}/retry-failed", 409, headers=admin)
    call(
        "POST /batches/{batch_id}/remind",
        "POST",
        f"/batches/{batch}/remind",
        403,
        headers=viewer,
        json={"all_unsigned": True},
    )
    request_id = client.get(f"/api/v1/batches/{new_batch}/requests", headers=admin).json["items"][0]["id"]
    call("POST /requests/{request_id}/resend", "POST", f"/requests/{request_id}/resend", 409, headers=admin)
    call(
        "POST /requests/{request_id}/email",
        "POST",
        f"/requests/{request_id}/email",
        200,
        headers=admin,
        json={"email": "new@example.com"},
    )
    call(
        "POST /requests/{request_id}/email",
        "POST",
        f"/requests/{request_id}/email",
        422,
        headers=admin,
        json={"email": "no-at-sign"},
    )
    call("GET /suppressions", "GET", "/suppressions", 404, headers=viewer)  # admins' keys only
    call(
        "POST /batches/validate",
        "POST",
        "/batches/validate",
        422,
        headers=admin,
        **{**upload(), "data": {**upload()["data"], "file": (io.BytesIO(b""), "r.csv")}},
    )
    call("POST /batches/{batch_id}/retry-failed", "POST", f"/batches/{new_batch}/retry-failed", 403, headers=viewer)
    texting = {**upload(), "data": {**upload()["data"], "channel": "text_on_bounce"}}
    texted = call("POST /batches", "POST", "/batches", 201, headers=admin, **texting).json["id"]
    cap = "POST /batches/{batch_id}/text-cap"
    call(cap, "POST", f"/batches/{texted}/text-cap", 403, headers=viewer, json={"text_cap": 5})
    call(cap, "POST", f"/batches/{texted}/text-cap", 200, headers=admin, json={"text_cap": 5})
    call("POST /batches/{batch_id}/retry-failed", "POST", f"/batches/{new_batch}/retry-failed", 202, headers=admin)
    call(
        "POST /requests/{request_id}/email",
        "POST",
        f"/requests/{request_id}/email",
        403,
        headers=viewer,
        json={"email": "x@example.com"},
    )
    call("POST /requests/{request_id}/resend", "POST", f"/requests/{request_id}/resend", 403, headers=viewer)
    db.session.execute(update(SigningRequest).where(SigningRequest.id == request_id).values(status="expired"))
    db.session.commit()
    call("POST /requests/{request_id}/resend", "POST", f"/requests/{request_id}/resend", 202, headers=admin)
    call("POST /templates", "POST", "/templates", 201, headers=admin, json={"name": "T", "html": "<p>x</p>"})
    call("POST /templates", "POST", "/templates", 403, headers=viewer, json={"name": "T", "html": "<p>x</p>"})
    plain = create_template(
        db.session, name="Plain", html="", kind="pdf", file=plain_pdf(), user=world["admin"], now=NOW
    ).template.id
    db.session.commit()
    box = {"variable": "position", "page": 1, "x": 72, "y": 60, "width": 200, "height": 20}
    boxes = "PUT /templates/{template_id}/boxes"
    call(boxes, "PUT", f"/templates/{plain}/boxes", 200, headers=admin, json={"boxes": [box]})
    call(boxes, "PUT", f"/templates/{plain}/boxes", 422, headers=admin, json={"boxes": [{**box, "x": 500}]})
    call(boxes, "PUT", f"/templates/{plain}/boxes", 400, headers=admin, json={"boxes": [{**box, "page": 0}]})
    call(boxes, "PUT", f"/templates/{plain}/boxes", 403, headers=viewer, json={"boxes": [box]})
    call(boxes, "PUT", f"/templates/{world['template_id']}/boxes", 409, headers=admin, json={"boxes": []})
    call(boxes, "PUT", "/templates/999999/boxes", 404, headers=admin, json={"boxes": []})
    own = "PUT /templates/{template_id}/form-fields"
    column = {"name": "Nope", "use": "column", "column": "x"}
    call(own, "PUT", f"/templates/{plain}/form-fields", 200, headers=admin, json={"form_fields": []})
    call(own, "PUT", f"/templates/{plain}/form-fields", 422, headers=admin, json={"form_fields": [column]})
    call(own, "PUT", f"/templates/{plain}/form-fields", 400, headers=admin, json={"form_fields": [{"name": ""}]})
    call(own, "PUT", f"/templates/{plain}/form-fields", 403, headers=viewer, json={"form_fields": []})
    call(own, "PUT", f"/templates/{world['template_id']}/form-fields", 409, headers=admin, json={"form_fields": []})
    call(own, "PUT", "/templates/999999/form-fields", 404, headers=admin, json={"form_fields": []})
    read = "GET /templates/{template_id}/boxes"
    call(read, "GET", f"/templates/{plain}/boxes", 200, headers=viewer)
    call(read, "GET", f"/templates/{world['template_id']}/boxes", 409, headers=admin)
    call(read, "GET", "/templates/999999/boxes", 404, headers=admin)
    marked = create_template(
        db.session, name="Fields", html="<p>{{ field_iban }}</p>", user=world["admin"], now=NOW
    ).template.id
    db.session.commit()
    fields = "PUT /templates/{template_id}/fields"
    call(fields, "PUT", f"/templates/{marked}/fields", 200, headers=admin, json={"fields": [{"name": "iban"}]})
    call(fields, "PUT", f"/templates/{marked}/fields", 422, headers=admin, json={"fields": [{"name": "bic"}]})
    call(fields, "PUT", f"/templates/{marked}/fields", 400, headers=admin, json={"fields": [{"name": ""}]})
    call(fields, "PUT", f"/templates/{marked}/fields", 403, headers=viewer, json={"fields": []})
    call(fields, "PUT", "/templates/999999/fields", 404, headers=admin, json={"fields": []})
    call("GET /templates/{template_id}/fields", "GET", f"/templates/{marked}/fields", 200, headers=viewer)
    call("GET /templates/{template_id}/fields", "GET", "/templates/999999/fields", 404, headers=admin)
    parties = "PUT /templates/{template_id}/parties"
    employer = {"parties": [{"key": "recipient", "labels": {"en": "Employee"}}]}
    call(parties, "PUT", f"/templates/{marked}/parties", 200, headers=admin, json=employer)
    call(parties, "PUT", f"/templates/{marked}/parties", 422, headers=admin, json={"parties": [{"key": "../x"}]})
    call(parties, "PUT", f"/templates/{marked}/parties", 400, headers=admin, json={"parties": [{"key": ""}]})
    call(parties, "PUT", f"/templates/{marked}/parties", 403, headers=viewer, json=employer)
    call(parties, "PUT", "/templates/999999/parties", 404, headers=admin, json=employer)
    call("GET /templates/{template_id}/parties", "GET", f"/templates/{marked}/parties", 200, headers=viewer)
    call("GET /templates/{template_id}/parties", "GET", "/templates/999999/parties", 404, headers=admin)
    sample = "PUT /templates/{template_id}/sample"
    row = {"sample": {"name": "<script>", "salary": "{{ 7*7 }}"}}
    call(sample, "PUT", f"/templates/{marked}/sample", 200, headers=admin, json=row)
    call(sample, "PUT", f"/templates/{marked}/sample", 400, headers=admin, json={"sample": {"": "x"}})
    call(sample, "PUT", f"/templates/{marked}/sample", 403, headers=viewer, json=row)
    call(sample, "PUT", "/templates/999999/sample", 404, headers=admin, json=row)
    _tour_documents(call, world, admin=admin, viewer=viewer, unrendered=request_id)
    suppress(db.session, email="tour@example.com", source="bounce", reason="550 5.1.1", now=NOW)  # the fuzzer may
    db.session.commit()  # have lifted the other
    call("DELETE /suppressions/{email}", "DELETE", "/suppressions/tour@example.com", 200, headers=admin)
    call("DELETE /suppressions/{email}", "DELETE", "/suppressions/a%00b", 400, headers=admin)
    erase = "POST /privacy/erasures"
    call(erase, "POST", "/privacy/erasures", 200, headers=admin, json={"email": "nobody@example.com"})
    call(erase, "POST", "/privacy/erasures", 400, headers=admin, json={"email": None})
    call(erase, "POST", "/privacy/erasures", 404, headers=viewer, json={"email": "nobody@example.com"})  # admins' only
    waiting = _tour_approval(call, world, admin=admin, viewer=viewer, upload=upload)
    # A key whose call is still running (409), and one whose answer is kept for another request (422).
    key_id = db.session.scalar(select(func.max(ApiKey.id)).where(ApiKey.user_id == world["admin"].id))
    db.session.add_all(
        [
            IdempotencyKey(
                api_key_id=key_id,
                key=key,
                fingerprint="another request",
                status_code=status,
                created_at=utcnow(),
                expires_at=utcnow() + idempotency.TTL,
            )
            for key, status in (("running", None), ("answered", 201))
        ]
    )
    db.session.commit()
    for label, url, kwargs in (
        ("POST /batches", "/batches", None),
        ("POST /templates", "/templates", {"json": {"name": "T", "html": "x"}}),
        ("POST /batches/{batch_id}/cancel", f"/batches/{batch}/cancel", {}),
        ("POST /batches/{batch_id}/retry-failed", f"/batches/{batch}/retry-failed", {}),
        ("POST /batches/{batch_id}/remind", f"/batches/{batch}/remind", {"json": {"all_unsigned": True}}),
        ("POST /batches/{batch_id}/countersign-digests", f"/batches/{batch}/countersign-digests", {}),
        ("POST /batches/{batch_id}/text-cap", f"/batches/{batch}/text-cap", {"json": {"text_cap": 5}}),
        ("POST /requests/{request_id}/resend", f"/requests/{request_id}/resend", {}),
        ("POST /batches/{batch_id}/exports", f"/batches/{batch}/exports", {}),
        ("POST /batches/{batch_id}/evidence", f"/batches/{batch}/evidence", {}),
        ("POST /batches/{batch_id}/approve", f"/batches/{waiting}/approve", {}),
        ("POST /batches/{batch_id}/reject", f"/batches/{waiting}/reject", {"json": {"reason": "x"}}),
        (
            "POST /batches/{batch_id}/address-changes/{change_id}/approve",
            f"/batches/{batch}/address-changes/1/approve",
            {},
        ),
        (
            "POST /batches/{batch_id}/address-changes/{change_id}/reject",
            f"/batches/{batch}/address-changes/1/reject",
            {"json": {"reason": "x"}},
        ),
    ):
        for key, status in (("running", 409), ("answered", 422)):
            call(label, "POST", url, status, headers={**admin, "Idempotency-Key": key}, **(kwargs or upload()))
    return seen


def _tour_approval(call, world, *, admin: dict, viewer: dict, upload) -> int:
    """Batches of a team that requires approval: one approved, one rejected, neither decided twice (409); the id of
    a third that still waits."""
    db.session.execute(update(Team).values(require_approval=True))  # the tour creates no batch after this
    db.session.commit()
    creator = _key(world["staff"])  # an admin approves, never the batch's creator
    first, second, third = (
        call("POST /batches", "POST", "/batches", 201, headers=creator, **upload()).json["id"] for _ in range(3)
    )
    statuses = db.session.scalars(select(Batch.status).where(Batch.id.in_([first, second, third])))
    assert set(statuses) == {BatchStatus.AWAITING_APPROVAL}
    approve, reject = "POST /batches/{batch_id}/approve", "POST /batches/{batch_id}/reject"
    why = {"json": {"reason": "The salaries are last year's."}}
    call(approve, "POST", f"/batches/{first}/approve", 403, headers=viewer)
    call(approve, "POST", f"/batches/{first}/approve", 403, headers=creator)
    once = {**admin, "Idempotency-Key": "approve-1"}
    assert call(approve, "POST", f"/batches/{first}/approve", 200, headers=once).json["status"] == "sending"
    retried = call(approve, "POST", f"/batches/{first}/approve", 200, headers=once)  # a lost answer asked again
    assert retried.headers["Idempotent-Replayed"] == "true"
    call(approve, "POST", f"/batches/{first}/approve", 409, headers=admin)
    call(reject, "POST", f"/batches/{first}/reject", 409, headers=admin, **why)
    call(reject, "POST", f"/batches/{second}/reject", 400, headers=admin, json={"reason": ""})
    call(reject, "POST", f"/batches/{second}/reject", 403, headers=viewer, **why)
    assert call(reject, "POST", f"/batches/{second}/reject", 200, headers=admin, **why).json["status"] == "cancelled"
    call(approve, "POST", f"/batches/{second}/approve", 409, headers=admin)
    too_long = {"Idempotency-Key": "k" * (idempotency.MAX_KEY_LENGTH + 1)}
    call(approve, "POST", f"/batches/{third}/approve", 400, headers={**admin, **too_long})
    _tour_address_changes(call, first, creator=creator, admin=admin, viewer=viewer)
    tour_corrections(call, first, creator=creator, admin=admin, viewer=viewer)
    return third


def _tour_address_changes(call, batch: int, *, creator: dict, admin: dict, viewer: dict) -> None:
    """Address changes in an approved batch of a team that requires approval: held (202) and listed, approved once,
    rejected with a reason, never decided by whoever asked or a reader."""
    first, second = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch).order_by(SigningRequest.id)
    ).all()[:2]
    email = "POST /requests/{request_id}/email"
    asked = call(email, "POST", f"/requests/{first}/email", 202, headers=creator, json={"email": "a@moved.example"})
    change = asked.json["pending_change"]["id"]
    other = call(email, "POST", f"/requests/{second}/email", 202, headers=creator, json={"email": "b@moved.example"})
    other = other.json["pending_change"]["id"]
    listing = "GET /batches/{batch_id}/address-changes"
    page = call(listing, "GET", f"/batches/{batch}/address-changes?limit=1", 200, headers=viewer).json
    assert [c["id"] for c in page["items"]] == [change] and page["next_cursor"]
    call(listing, "GET", f"/batches/{batch}/address-changes?status=maybe", 400, headers=viewer)
    call(listing, "GET", f"/batches/{batch}/address-changes?cursor=bm9wZQ", 422, headers=viewer)
    call(listing, "GET", "/batches/999999/address-changes", 404, headers=viewer)
    approve = "POST /batches/{batch_id}/address-changes/{change_id}/approve"
    reject = "POST /batches/{batch_id}/address-changes/{change_id}/reject"
    why = {"json": {"reason": "Ask her on the phone first."}}
    call(approve, "POST", f"/batches/{batch}/address-changes/{change}/approve", 403, headers=creator)
    call(approve, "POST", f"/batches/{batch}/address-changes/{change}/approve", 403, headers=viewer)
    call(approve, "POST", f"/batches/{batch}/address-changes/999999/approve", 404, headers=admin)
    too_long = {"Idempotency-Key": "k" * (idempotency.MAX_KEY_LENGTH + 1)}
    call(approve, "POST", f"/batches/{batch}/address-changes/{change}/approve", 400, headers={**admin, **too_long})
    decided = call(approve, "POST", f"/batches/{batch}/address-changes/{change}/approve", 200, headers=admin).json
    # Its request is not sent yet: its first invitation goes to the new address.
    assert (decided["status"], decided["sent"], decided["not_sent_reason"]) == ("approved", False, "not_sent")
    call(approve, "POST", f"/batches/{batch}/address-changes/{change}/approve", 409, headers=admin)
    call(reject, "POST", f"/batches/{batch}/address-changes/{change}/reject", 409, headers=admin, **why)
    call(reject, "POST", f"/batches/{batch}/address-changes/{other}/reject", 400, headers=admin, json={})
    call(reject, "POST", f"/batches/{batch}/address-changes/{other}/reject", 422, headers=admin, json={"reason": " "})
    call(reject, "POST", f"/batches/{batch}/address-changes/{other}/reject", 403, headers=viewer, **why)
    call(reject, "POST", f"/batches/{batch}/address-changes/999999/reject", 404, headers=admin, **why)
    assert (
        call(reject, "POST", f"/batches/{batch}/address-changes/{other}/reject", 200, headers=admin, **why).json[
            "status"
        ]
        == "rejected"
    )


def _tour_documents(call, world, *, admin: dict, viewer: dict, unrendered: int) -> None:
    """A request's documents, a batch's ZIP and its evidence package: ready, not yet (409), a file storage lost
    (503), purged (410)."""
    signed, batch = world["signed_id"], db.session.get(SigningRequest, world["signed_id"]).batch_id
    request = "GET /requests/{request_id}"
    call(request, "GET", f"/requests/{signed}", 200, headers=viewer)
    for what in ("document", "signed", "certificate"):
        call(f"{request}/{what}", "GET", f"/requests/{signed}/{what}", 200, headers=viewer)
        # The batch made from the file has rendered nothing: no original, nothing signed.
        call(f"{request}/{what}", "GET", f"/requests/{unrendered}/{what}", 409, headers=admin)
    # A file its signer attached, and a field without one.
    scan = fill(signed, now=NOW, values={}, scan=scan_png())
    attached = f"{request}/attachments/{{name}}"
    call(attached, "GET", f"/requests/{signed}/attachments/id_scan", 200, headers=viewer)
    call(attached, "GET", f"/requests/{signed}/attachments/iban", 404, headers=viewer)
    start = "POST /batches/{batch_id}/exports"
    call(start, "POST", f"/batches/{batch}/exports", 403, headers=viewer)
    export = call(start, "POST", f"/batches/{batch}/exports", 202, headers=admin).json["id"]
    status, download = (
        "GET /batches/{batch_id}/exports/{export_id}",
        "GET /batches/{batch_id}/exports/{export_id}/download",
    )
    call(download, "GET", f"/batches/{batch}/exports/{export}/download", 409, headers=viewer)
    signed_zip(export)
    call(status, "GET", f"/batches/{batch}/exports/{export}", 200, headers=viewer)
    call(download, "GET", f"/batches/{batch}/exports/{export}/download", 200, headers=viewer)
    # Its evidence package: the same job, another kind of export.
    begin = "POST /batches/{batch_id}/evidence"
    call(begin, "POST", f"/batches/{batch}/evidence", 403, headers=viewer)
    package = call(begin, "POST", f"/batches/{batch}/evidence", 202, headers=admin).json["id"]
    follow, fetch = (
        "GET /batches/{batch_id}/evidence/{export_id}",
        "GET /batches/{batch_id}/evidence/{export_id}/download",
    )
    assert call(follow, "GET", f"/batches/{batch}/evidence/{package}", 200, headers=viewer).json["download_url"] is None
    call(fetch, "GET", f"/batches/{batch}/evidence/{package}/download", 409, headers=viewer)
    signed_zip(package)
    assert call(follow, "GET", f"/batches/{batch}/evidence/{package}", 200, headers=viewer).json["status"] == "ready"
    call(fetch, "GET", f"/batches/{batch}/evidence/{package}/download", 200, headers=viewer)
    # The storage lost the files: the ZIP and the signed PDF's, and with it the certificate's.
    storage = get_storage()
    storage.delete(db.session.get(Export, export).storage_key)
    storage.delete(db.session.get(Export, package).storage_key)
    storage.delete(
        db.session.scalar(select(Document.storage_key).where(Document.request_id == signed, Document.kind == "signed"))
    )
    call(download, "GET", f"/batches/{batch}/exports/{export}/download", 503, headers=admin)
    call(fetch, "GET", f"/batches/{batch}/evidence/{package}/download", 503, headers=admin)
    for what in ("signed", "certificate"):
        call(f"{request}/{what}", "GET", f"/requests/{signed}/{what}", 503, headers=admin)
    storage.delete(
        db.session.scalar(
            select(Document.storage_key).where(Document.request_id == signed, Document.kind == "original")
        )
    )
    call(f"{request}/document", "GET", f"/requests/{signed}/document", 503, headers=admin)
    storage.delete(scan)
    call(attached, "GET", f"/requests/{signed}/attachments/id_scan", 503, headers=admin)
    # Purged under the retention rules (or an erasure): its files are gone for good, and say so.
    purge_requests(db.session, storage=storage, request_ids=[signed], now=utcnow(), reason="erasure")
    db.session.commit()
    for what in ("document", "signed", "certificate"):
        call(f"{request}/{what}", "GET", f"/requests/{signed}/{what}", 410, headers=admin)
    call(attached, "GET", f"/requests/{signed}/attachments/id_scan", 410, headers=admin)


def _tour_limits(make_app, spec, admin_email) -> set[tuple[str, str]]:
    """413 and 429 need their own settings: a small upload limit and a small rate limit."""
    app = make_app(MAX_UPLOAD_MB=1, API_RATE_LIMIT="2 per minute")
    client, check, seen = app.test_client(), _validator(spec), set()
    with app.app_context():
        from bulksign.models import User

        headers = _key(db.session.scalar(select(User).where(User.email == admin_email)))
        big = client.post(
            "/api/v1/batches/validate",
            headers=headers,
            content_type="multipart/form-data",
            data={"template_id": "1", "file": (io.BytesIO(b"x" * (1024 * 1024 + 10)), "r.csv")},
        )
        assert big.status_code == 413
        check("POST /batches/validate", big)
        seen |= {("POST /batches/validate", "413"), ("POST /batches", "413")}
        # The refused upload may or may not have counted (413 can come before the limiter): spend the budget.
        statuses = [client.get("/api/v1/me", headers=headers).status_code for _ in range(2)]
        limited = client.get("/api/v1/me", headers=headers)
        assert statuses[0] == 200
        assert limited.status_code == 429
        check("GET /me", limited)
    # One budget per key over every operation: a 429 on one is a 429 on all.
    return seen | {(label, "429") for label, _ in _documented(spec)}


@pytest.mark.slow(seconds=120)
def test_schemathesis_against_the_live_app(live_server, app, world, make_app, tmp_path):
    spec = build_spec(app)
    seconds = int(os.environ.get("API_FUZZ_SECONDS", "0"))
    config = tmp_path / "schemathesis.toml"
    config.write_text(f"""
[checks.positive_data_acceptance]
expected-statuses = {json.dumps(ACCEPTABLE_FOR_VALID_DATA.split(","))}
""")
    har = tmp_path / "run.har"
    started = time.monotonic()
    command = [
        ST,
        "--config-file",
        str(config),
        "run",
        live_server + "/api/v1/openapi.json",
        "--header",
        f"Authorization:{world['headers']['Authorization']}",
        "--checks",
        "all",
        "--max-examples",
        os.environ.get("API_FUZZ_EXAMPLES", "6"),
        "--workers",
        "1",
        "--seed",
        os.environ.get("API_FUZZ_SEED", "20261201"),
        "--report",
        "har",
        "--report-har-path",
        str(har),
        "--request-timeout",
        "60",
        # One worker: two threads compiling at once hit CPython 3.11's "AST constructor recursion depth
        # mismatch" inside the fuzzer (its own runtime error, not a finding about the API).
        # A slow answer is not a wrong one: the check's 10 s default trips on a busy shared CI machine.
        "--max-response-time",
        "60",
        "--suppress-health-check",
        "all",
        "--warnings",
        "off",
    ]
    if seconds:
        command += ["--max-time", str(seconds)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=max(600, seconds * 3))
    elapsed = time.monotonic() - started
    print(run.stdout[-6000:], f"\nschemathesis: {elapsed:.0f} s", file=sys.stderr)
    assert run.returncode == 0, run.stdout[-15000:] + run.stderr[-3000:]

    seen = set()
    for entry in json.loads(har.read_text())["log"]["entries"]:
        label = _operation_of(spec, entry["request"]["method"].lower(), entry["request"]["url"])
        if label:
            seen.add((label, str(entry["response"]["status"])))
    fuzzed = set(seen)
    seen |= _tour(app, world, spec)
    seen |= _tour_limits(make_app, spec, world["admin"].email)
    missing = sorted(_documented(spec) - seen)
    assert missing == [], f"documented but never answered: {missing}"
    print(f"statuses seen by the fuzzer: {len(fuzzed)}, documented: {len(_documented(spec))}", file=sys.stderr)
