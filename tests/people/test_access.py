"""Teams and roles: who may see and change which batch, request, export and template, on pages and the API.

The route tables read ``app.url_map``: every staff and API route must be classified below, or the
first test fails, and every route taking a batch, request or template id is tried with another
team's id by every role (404, never 403: ids cannot be probed).
"""

from __future__ import annotations

import io

import pytest
from flask import g
from flask.testing import FlaskClient
from werkzeug.routing import Rule

from bulksign.batches.field_values import values_by_name
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, BatchShare, Export, FieldValue, OutgoingMail, SigningRequest, Team, utcnow
from bulksign.people.teams import add_member, create_team
from bulksign.people.users import create_api_key, create_user
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.web import AuthActions, csrf_from

PASSWORD = "team-password"
#: The field of the world's request that holds a signer's attachment.
ATTACHMENT = "id_scan"
#: Reads of one batch (and its requests, exports, recipients): everyone who sees the batch.
BATCH_READS = {
    "batches.detail",
    "batches.progress",
    "batches.table",
    "batches.timeline",
    "batches.export_csv",
    "batches.export_status",
    "batches.export_download",
    "batches.skipped_rows",
    "api_dashboard.get_batch",
    "api_dashboard.list_requests",
    "api_dashboard.export_csv",
    "api_requests.get_request",
    "api_requests.document",
    "api_requests.signed",
    "api_requests.certificate",
    "api_exports.export_status",
    "api_exports.download",
    "evidence.status",
    "evidence.download",
    "api_evidence.evidence_status",
    "api_evidence.download",
    "approval.sample",
    "batches.attachment",
    "api_requests.attachment_download",
    "api_approval.list_address_changes",
    "approval.find_samples",
}
#: Reads of a request's documents that answer 409 for the world's request (sent, nothing rendered or signed), and
#: the approver's samples of the world's batch, which does not wait for approval.
NOT_YET_READS = {"api_requests.document", "api_requests.signed", "api_requests.certificate", "approval.sample"}
#: Building an export of a batch: everyone who sees it but viewers.
BATCH_EXPORTS = {"batches.start_export", "api_exports.start", "evidence.start", "api_evidence.start"}
#: Approving or rejecting a batch that waits for approval: a manager of its team or an admin, never its creator
#: (tests/batches/test_approval.py); 409 for the world's batch, which does not wait.
APPROVALS = {"approval.approve", "approval.reject", "api_approval.approve", "api_approval.reject"}
#: Approving or rejecting an address change held for approval: the same people, never whoever asked for it
#: (tests/batches/test_address_change_approval.py); 404 for a change the batch does not have.
APPROVALS |= {
    "approval.approve_change",
    "approval.reject_change",
    "api_approval.approve_address_change",
    "api_approval.reject_address_change",
}
#: Approving or rejecting a correction held for approval: the same people, never whoever asked for it
#: (tests/batches/test_corrections.py).
APPROVALS |= {"reminders.decide", "api_corrections.approve", "api_corrections.reject"}
#: Actions on a batch or its requests: the owner, a manager of its team, admins.
BATCH_ACTIONS = {
    "batches.bulk_action",
    "reminders.remind",
    "reminders.resend_selected",
    "reminders.resend_one",
    "reminders.update_email",
    "reminders.correct",
    "api_corrections.correct",
    "batch_access.share",
    "batch_access.unshare",
    "batch_access.notices",
    "batch_access.text_cap",
    "api_batch_actions.text_cap",
    "api_batch_actions.cancel",
    "api_batch_actions.retry",
    "api_reminders.remind",
    "api_reminders.resend",
    "api_reminders.update_email",
    "reminders.countersign_digests",
    "api_reminders.countersign_digests",
}
TEMPLATE_READS = {
    "doc_templates.detail",
    "doc_templates.preview",
    "doc_templates.preview_pdf",
    "doc_templates.page_image",
    "api_templates.boxes",
    "api_templates.fields",
    "api_templates.parties",
    "party_preview.preview",
    "party_preview.page_image",
}
#: Reads only a PDF template answers (the world's template is HTML); tested on a PDF in test_pdf_templates.
PDF_TEMPLATE_READS = {"doc_templates.page_image", "api_templates.boxes"}
TEMPLATE_EDITS = {
    "doc_templates.edit",
    "doc_templates.place",
    "doc_templates.set_fields",
    "api_templates.place_boxes",
    "api_templates.set_form_fields",
    "api_templates.set_fields",
    "doc_templates.set_parties",
    "api_templates.set_parties",
    "word_check.start_for_template",
    "party_preview.set_sample",
    "api_templates.set_sample",
}
#: Lists and searches: filtered to what the user sees.
LISTS = {"batches.index", "doc_templates.index", "api_dashboard.list_batches", "api_templates.index"}
#: Creating batches and templates: not for viewers; the template must be one the user may use.
CREATES = {
    "uploads.new",
    "uploads.columns",
    "uploads.create",
    "uploads.validate",
    "uploads.recheck",
    "uploads.error_report",
    "uploads.match_columns",
    "row_preview.rows",
    "row_preview.row",
    "row_preview.row_pdf",
    "row_preview.row_page",
    "doc_templates.new",
    "word_check.start_new",
    "api_templates.create",
    "api_uploads.create",
    "api_uploads.validate",
}
#: The user's own session and account.
OWN = {
    "main.dashboard",
    "main.live",
    "auth.logout",
    "auth.set_language",
    "api.me",
    "account.index",
    "account.set_name",
    "account.set_password",
}
#: A Word check: only the one who started it sees it (the file it checks may be saved nowhere else); tested in
#: tests/views/test_word_check.py.
OWN_CHECKS = {"word_check.show", "word_check.status", "word_check.again", "word_check.page_image"}
#: Admins only (tested route by route in test_security_sweep); ids there are users, keys and endpoints.
ADMIN_BLUEPRINTS = {"admin", "rq_dashboard", "suppressions", "api_suppressions", "privacy", "api_privacy"}
ID_ARGUMENTS = {"batch_id", "request_id", "template_id"}


def _is_public(app, endpoint: str) -> bool:
    return endpoint == "static" or getattr(app.view_functions[endpoint], "_bulksign_public", False)


def _staff_rules(app):
    for rule in app.url_map.iter_rules():
        if not _is_public(app, rule.endpoint) and rule.endpoint.rpartition(".")[0] not in ADMIN_BLUEPRINTS:
            yield rule


def _methods(rule: Rule) -> list[str]:
    return sorted(rule.methods - {"HEAD", "OPTIONS"})


@pytest.fixture
def world(app, users):
    """Teams A and B; in A a manager, the owner (staff), another staff and a viewer; in B one of each role."""
    now = utcnow()
    team_a, team_b = create_team(db.session, name="Accounting", now=now), create_team(db.session, name="HR", now=now)
    people = {"admin": users["admin"]}
    for key, role, team in [
        ("manager_a", "manager", team_a),
        ("owner_a", "staff", team_a),
        ("staff_a", "staff", team_a),
        ("viewer_a", "viewer", team_a),
        ("manager_b", "manager", team_b),
        ("staff_b", "staff", team_b),
        ("viewer_b", "viewer", team_b),
    ]:
        people[key] = create_user(db.session, email=f"{key}@example.com", password=PASSWORD, role=role, now=now)
        add_member(db.session, team=team, user=people[key], by=None, now=now)
    db.session.commit()
    batch = batch_in_states(
        db.session,
        statuses=["sent", "failed", "signed"],
        now=NOW,
        name="Salaries Q4",
        user_id=people["owner_a"].id,
        team_id=team_a.id,
    )
    get_storage().put(f"exports/{batch.id}/1-signed.zip", b"PK\x05\x06" + b"\x00" * 18, content_type="application/zip")
    export = Export(
        batch_id=batch.id,
        status="ready",
        total=0,
        done=0,
        storage_key=f"exports/{batch.id}/1-signed.zip",
        created_at=NOW,
    )
    db.session.add(export)
    db.session.flush()
    # An evidence package of the batch, for its reads (``evidence_id`` in the URLs below).
    get_storage().put(
        f"exports/{batch.id}/2-evidence.zip", b"PK\x05\x06" + b"\x00" * 18, content_type="application/zip"
    )
    evidence = Export(
        batch_id=batch.id,
        kind="evidence",
        status="ready",
        total=0,
        done=0,
        storage_key=f"exports/{batch.id}/2-evidence.zip",
        created_at=NOW,
    )
    db.session.add(evidence)
    # A file a signer attached to the request, for the attachment downloads (``ATTACHMENT`` in the URLs below).
    # The request out for signing: the one a resend is for (the failed one is retried, the signed one is done).
    request_id = db.session.scalar(
        db.select(SigningRequest.id).where(SigningRequest.batch_id == batch.id, SigningRequest.status == "sent")
    )
    scan_key = f"batches/{batch.id}/requests/{request_id}/fields/{ATTACHMENT}.pdf"
    get_storage().put(scan_key, b"%PDF-1.4 scan", content_type="application/pdf")
    db.session.add(
        FieldValue(
            request_id=request_id,
            batch_id=batch.id,
            name=ATTACHMENT,
            role="recipient",
            value="scan.pdf",
            storage_key=scan_key,
            content_type="application/pdf",
            size=13,
            sha256="0" * 64,
            entered_at=NOW,
        )
    )
    db.session.commit()
    template_id = batch.template_version.template_id
    return {
        "people": people,
        "team_a": team_a.id,
        "team_b": team_b.id,
        "batch_id": batch.id,
        "request_id": request_id,
        "template_id": template_id,
        "export_id": export.id,
        "evidence_id": evidence.id,
    }


def _url(rule: Rule, world) -> str:
    # An evidence package's URL names it by the same ``export_id`` as the signed ZIP's.
    evidence = rule.endpoint.partition(".")[0] in ("evidence", "api_evidence")
    values = {
        "batch_id": world["batch_id"],
        "request_id": world["request_id"],
        "template_id": world["template_id"],
        "export_id": world["evidence_id" if evidence else "export_id"],
        "user_id": world["people"]["staff_b"].id,
        "upload_id": "x" * 32,
        "page": 1,
        "name": ATTACHMENT,
        "change_id": 1,
        "correction_id": 1,
        "role": "recipient",
        "number": 1,
    }
    return rule.build({arg: values[arg] for arg in rule.arguments}, append_unknown=False)[1]


class _OwnUserClient(FlaskClient):
    """Tests share one app context: the user and CSRF token cached on ``g`` would carry over between clients."""

    def open(self, *args, **kwargs):
        g.pop("_login_user", None)
        g.pop("csrf_token", None)
        return super().open(*args, **kwargs)


def _web(app, user):
    client = _OwnUserClient(app, app.response_class, use_cookies=True)
    AuthActions(client).login(user.email, PASSWORD if user.email != "admin@example.com" else "admin-password")
    return client, csrf_from(client.get("/"))


def _api_headers(user) -> dict:
    secret = create_api_key(db.session, user=user, name="t", now=utcnow()).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


# --- the route tables ----------------------------------------------------------------------------


def test_every_staff_and_api_route_is_classified_so_a_new_route_cannot_slip_through(app):
    classified = (
        BATCH_READS
        | BATCH_EXPORTS
        | BATCH_ACTIONS
        | APPROVALS
        | TEMPLATE_READS
        | TEMPLATE_EDITS
        | LISTS
        | CREATES
        | OWN
        | OWN_CHECKS
    )
    endpoints = {rule.endpoint for rule in _staff_rules(app)}
    assert endpoints - classified == set(), "classify the new route in tests/test_access.py"
    assert classified - endpoints == set(), "a classified route is gone: take it out of the table"
    # Every route with a batch, request or template id is one of the id-checked kinds.
    for rule in _staff_rules(app):
        if rule.arguments & ID_ARGUMENTS:
            assert (
                rule.endpoint
                in BATCH_READS | BATCH_EXPORTS | BATCH_ACTIONS | APPROVALS | TEMPLATE_READS | TEMPLATE_EDITS
            ), rule.endpoint


@pytest.mark.parametrize("role", ["manager_b", "staff_b", "viewer_b"])
def test_every_id_route_answers_404_to_every_role_of_another_team_on_pages_and_api(app, world, role):
    user = world["people"][role]
    client, token = _web(app, user)
    headers = _api_headers(user)
    tried = 0
    for rule in _staff_rules(app):
        if not rule.arguments & ID_ARGUMENTS:
            continue
        for method in _methods(rule):
            if rule.rule.startswith("/api/"):
                response = client.open(_url(rule, world), method=method, headers=headers, json={})
                assert response.is_json, (method, rule.rule)
            else:
                response = client.open(_url(rule, world), method=method, data={"csrf_token": token})
            assert response.status_code == 404, (role, method, rule.rule, response.status_code)
            tried += 1
    assert tried >= 29
    # Nothing of team A's batch changed.
    assert db.session.get(Batch, world["batch_id"]).status == "processing"
    assert not db.session.scalars(db.select(BatchShare)).all()


@pytest.mark.parametrize("role", ["admin", "manager_a", "owner_a", "staff_a", "viewer_a"])
def test_every_read_of_the_teams_batch_and_template_answers_every_role_of_the_team(app, world, role):
    user = world["people"][role]
    client, token = _web(app, user)
    headers = _api_headers(user)
    for rule in _staff_rules(app):
        if rule.endpoint not in BATCH_READS | TEMPLATE_READS or rule.endpoint in PDF_TEMPLATE_READS:
            continue
        for method in _methods(rule):
            kwargs = {"headers": headers} if rule.rule.startswith("/api/") else {"data": {"csrf_token": token}}
            response = client.open(_url(rule, world), method=method, **kwargs)
            seen = (200, 302, 409) if rule.endpoint in NOT_YET_READS else (200, 302)
            # Closed as a WSGI server closes it: a streamed download left open ends inside the next request.
            response.close()
            assert response.status_code in seen, (role, method, rule.rule, response.status_code)


@pytest.mark.parametrize(
    "role, allowed", [("admin", True), ("manager_a", True), ("owner_a", True), ("staff_a", True), ("viewer_a", False)]
)
def test_a_viewer_downloads_the_teams_exports_but_cannot_build_one_as_the_other_roles_do(app, world, role, allowed):
    client, token = _web(app, world["people"][role])
    started = client.post(f"/batches/{world['batch_id']}/exports", data={"csrf_token": token})
    fragment = client.post(
        f"/batches/{world['batch_id']}/exports", data={"csrf_token": token}, headers={"HX-Request": "true"}
    )
    download = client.get(f"/batches/{world['batch_id']}/exports/{world['export_id']}/download")
    assert download.status_code == 200 and download.data.startswith(b"PK")
    # The API: the same rule (starting again while one is unfinished answers that one).
    headers = _api_headers(world["people"][role])
    over_api = _OwnUserClient(app, app.response_class).post(
        f"/api/v1/batches/{world['batch_id']}/exports", headers=headers
    )
    api_download = _OwnUserClient(app, app.response_class).get(
        f"/api/v1/batches/{world['batch_id']}/exports/{world['export_id']}/download", headers=headers
    )
    assert api_download.status_code == 200 and api_download.data == download.data
    exports = db.session.scalars(
        db.select(Export).where(Export.batch_id == world["batch_id"], Export.kind == "signed_zip")
    ).all()
    if allowed:
        assert (started.status_code, fragment.status_code, over_api.status_code, len(exports)) == (302, 200, 202, 2)
    else:
        assert (started.status_code, fragment.status_code, over_api.status_code, len(exports)) == (403, 403, 403, 1)
        assert "not build new ones" in started.get_data(as_text=True)
        assert "not build new ones" in over_api.get_json()["error"]["message"]


@pytest.mark.parametrize(
    "role, allowed", [("admin", True), ("manager_a", True), ("owner_a", True), ("staff_a", False), ("viewer_a", False)]
)
def test_actions_on_the_teams_batch_are_for_its_owner_its_teams_managers_and_admins(app, world, role, allowed):
    headers = _api_headers(world["people"][role])
    client = _OwnUserClient(app, app.response_class)
    retry = client.post(f"/api/v1/batches/{world['batch_id']}/retry-failed", headers=headers)
    remind = client.post(f"/api/v1/batches/{world['batch_id']}/remind", json={"all_unsigned": True}, headers=headers)
    resend = client.post(f"/api/v1/requests/{world['request_id']}/resend", headers=headers)
    if allowed:
        assert (retry.status_code, remind.status_code, resend.status_code) == (202, 202, 202)
    else:
        assert (retry.status_code, remind.status_code, resend.status_code) == (403, 403, 403)
        assert "owner, a manager of its team or an admin" in retry.get_json()["error"]["message"]


@pytest.mark.parametrize(
    "role, allowed", [("admin", True), ("manager_a", True), ("owner_a", True), ("staff_a", False), ("viewer_a", False)]
)
def test_editing_a_template_is_for_its_owner_its_teams_managers_and_admins(app, world, role, allowed):
    client, token = _web(app, world["people"][role])
    url = f"/templates/{world['template_id']}/edit"
    page = client.get(url)
    saved = client.post(url, data={"csrf_token": token, "html": "<p>{{ name }} changed</p>"})
    detail = client.get(f"/templates/{world['template_id']}").get_data(as_text=True)
    sample = client.post(f"/templates/{world['template_id']}/sample", data={"csrf_token": token, "sample-name": "x"})
    # Placing boxes and assigning form fields over the API: the same right (the world's template is HTML, so one who may gets a 409).
    boxes = _OwnUserClient(app, app.response_class).put(
        f"/api/v1/templates/{world['template_id']}/boxes",
        json={"boxes": []},
        headers=_api_headers(world["people"][role]),
    )
    form_fields = _OwnUserClient(app, app.response_class).put(
        f"/api/v1/templates/{world['template_id']}/form-fields",
        json={"form_fields": []},
        headers=_api_headers(world["people"][role]),
    )
    if allowed:
        assert page.status_code == 200 and saved.status_code == 302 and sample.status_code == 302
        assert f'href="{url}"' in detail
        assert boxes.status_code == 409 and form_fields.status_code == 409
    else:
        assert page.status_code == 403 and saved.status_code == 403 and boxes.status_code == 403
        assert form_fields.status_code == 403
        assert sample.status_code == 403
        assert "you may use it for a batch" in page.get_data(as_text=True)
        assert f'href="{url}"' not in detail  # no Edit button for who may only use it
        assert db.session.get(Batch, world["batch_id"]).template_version.template.latest_version == 1


# --- lists, searches and counts ---------------------------------------------------------------


def test_lists_searches_and_the_api_show_only_the_users_teams_batches_and_templates(app, world):
    batch_in_states(
        db.session,
        statuses=["sent"],
        now=NOW,
        name="Salaries HR",
        user_id=world["people"]["staff_b"].id,
        team_id=world["team_b"],
    )
    client, _ = _web(app, world["people"]["staff_b"])
    for path in ("/batches/", "/batches/?q=Salaries", "/templates/"):
        page = client.get(path).get_data(as_text=True)
        assert "Salaries HR" in page and "Salaries Q4" not in page, path
    headers = _api_headers(world["people"]["staff_b"])
    names = [b["name"] for b in client.get("/api/v1/batches?q=Salaries", headers=headers).get_json()["items"]]
    assert names == ["Salaries HR"]
    templates = [t["name"] for t in client.get("/api/v1/templates", headers=headers).get_json()["items"]]
    assert templates == ["Salaries HR template"]
    admin, _ = _web(app, world["people"]["admin"])
    page = admin.get("/batches/?q=Salaries").get_data(as_text=True)
    assert "Salaries HR" in page and "Salaries Q4" in page


def test_a_user_without_a_team_sees_only_their_own_batches(app, world):
    loner = create_user(db.session, email="loner@example.com", password=PASSWORD, role="staff", now=utcnow())
    db.session.commit()
    batch_in_states(db.session, statuses=["sent"], now=NOW, name="Mine alone", user_id=loner.id, team_id=None)
    page = _web(app, loner)[0].get("/batches/").get_data(as_text=True)
    assert "Mine alone" in page and "Salaries Q4" not in page
    assert "Mine alone" not in _web(app, world["people"]["manager_a"])[0].get("/batches/").get_data(as_text=True)


def test_a_batch_shared_with_a_user_of_another_team_is_readable_by_them_not_changeable(app, world):
    owner, token = _web(app, world["people"]["owner_a"])
    shared = owner.post(
        f"/batches/{world['batch_id']}/shares", data={"csrf_token": token, "email": "staff_b@example.com"}
    )
    assert shared.status_code == 303
    reader, _ = _web(app, world["people"]["staff_b"])
    assert reader.get(f"/batches/{world['batch_id']}").status_code == 200
    assert reader.get(f"/batches/{world['batch_id']}/export.csv").status_code == 200
    assert "Salaries Q4" in reader.get("/batches/").get_data(as_text=True)
    headers = _api_headers(world["people"]["staff_b"])
    assert reader.post(f"/api/v1/batches/{world['batch_id']}/cancel", headers=headers).status_code == 403
    # The template stays out of reach: sharing a batch is not sharing its template.
    assert reader.get(f"/templates/{world['template_id']}").status_code == 404
    unshared = owner.post(
        f"/batches/{world['batch_id']}/shares/{world['people']['staff_b'].id}/remove",
        data={"csrf_token": token, "confirmed": "1"},
    )
    assert unshared.status_code == 303
    assert reader.get(f"/batches/{world['batch_id']}").status_code == 404


# --- creating ------------------------------------------------------------------------------------


def test_a_viewer_reads_but_cannot_create_batches_or_templates(app, world):
    viewer = world["people"]["viewer_a"]
    client, token = _web(app, viewer)
    assert client.get("/batches/new").status_code == 403
    assert client.post("/templates/new", data={"csrf_token": token, "name": "X", "html": "<p>x</p>"}).status_code == 403
    headers = _api_headers(viewer)
    created = client.post("/api/v1/templates", json={"name": "X", "html": "<p>x</p>"}, headers=headers)
    assert created.status_code == 403 and created.get_json()["error"]["message"]


def test_staff_use_a_template_their_team_shares_but_another_teams_template_is_not_found(app, world):
    csv = io.BytesIO(b"email,name\nann@example.com,Ann\n")
    mine = _api_headers(world["people"]["staff_a"])
    client = _OwnUserClient(app, app.response_class)
    created = client.post(
        "/api/v1/batches",
        headers=mine,
        content_type="multipart/form-data",
        data={"template_id": str(world["template_id"]), "file": (csv, "r.csv")},
    )
    assert created.status_code == 201
    batch = db.session.get(Batch, created.get_json()["id"])
    assert batch.team_id == world["team_a"] and batch.created_by_id == world["people"]["staff_a"].id
    other = _api_headers(world["people"]["staff_b"])
    refused = client.post(
        "/api/v1/batches",
        headers=other,
        content_type="multipart/form-data",
        data={
            "template_id": str(world["template_id"]),
            "file": (io.BytesIO(b"email,name\nann@example.com,Ann\n"), "r.csv"),
        },
    )
    assert refused.status_code == 404


def test_a_user_in_several_teams_chooses_the_batchs_team_and_only_among_their_own(app, world):
    people = world["people"]
    add_member(
        db.session, team=db.session.get(Team, world["team_b"]), user=people["staff_a"], by=people["admin"], now=utcnow()
    )
    db.session.commit()
    headers = _api_headers(people["staff_a"])
    client = _OwnUserClient(app, app.response_class)

    def create(team_id):
        return client.post(
            "/api/v1/batches",
            headers=headers,
            content_type="multipart/form-data",
            data={
                "template_id": str(world["template_id"]),
                "team_id": str(team_id),
                "file": (io.BytesIO(b"email,name\nann@example.com,Ann\n"), "r.csv"),
            },
        )

    chosen = create(world["team_b"])
    assert chosen.status_code == 201 and db.session.get(Batch, chosen.get_json()["id"]).team_id == world["team_b"]
    stranger = create_team(db.session, name="Legal", now=utcnow())
    db.session.commit()
    refused = create(stranger.id)
    assert refused.status_code == 422 and refused.get_json()["error"]["details"]["field"] == "team_id"


# --- who is told ---------------------------------------------------------------------------------


def test_a_batch_names_who_gets_its_decline_expiry_and_completion_notices(app, world):
    from datetime import timedelta

    from bulksign.batches.expiry import expire_due, queue_due_summaries
    from bulksign.batches.progress import refresh_batch_statuses
    from bulksign.signing.recipient_actions import decline, open_request
    from tests.support.signing_requests import make_sent_request

    owner, token = _web(app, world["people"]["owner_a"])
    page = owner.get(f"/batches/{world['batch_id']}").get_data(as_text=True)
    assert '<option value="manager_a@example.com" >manager_a@example.com (manager, Accounting)' in page
    assert "manager_b@example.com" not in page  # another team's manager is not offered
    for fields, to in [
        ({"notify_to": "manager_a@example.com"}, "manager_a@example.com"),
        ({"notify_to": "owner", "notify_email": "typed-then-changed-mind@example.com"}, None),
        ({"notify_to": "other", "notify_email": "auditor@example.com"}, "auditor@example.com"),
    ]:
        named = owner.post(f"/batches/{world['batch_id']}/notices", data={"csrf_token": token, **fields})
        assert named.status_code == 303 and db.session.get(Batch, world["batch_id"]).notify_email == to
    page = owner.get(f"/batches/{world['batch_id']}").get_data(as_text=True)
    assert '<option value="other" selected>' in page and 'value="auditor@example.com"' in page
    for bad in [{"notify_email": "nope"}, {"notify_to": "other"}]:
        assert owner.post(f"/batches/{world['batch_id']}/notices", data={"csrf_token": token, **bad}).status_code == 422
    # A decline and an expiry, each in a batch that names the head of HR.
    declined = make_sent_request(now=NOW, owner=world["people"]["owner_a"])
    expiring = make_sent_request(
        now=NOW, owner=world["people"]["owner_a"], email="late@example.com", expires_in=timedelta(days=1)
    )
    for batch_id in (declined.batch_id, expiring.batch_id):
        db.session.get(Batch, batch_id).notify_email = "head-of-hr@example.com"
    db.session.commit()
    open_request(db.session, request_id=declined.id, now=NOW, ip=None, user_agent=None)
    assert (
        decline(db.session, request_id=declined.id, now=NOW, reason="Wrong salary", ip=None, user_agent=None).status
        == "declined"
    )
    expire_due(db.session, now=NOW + timedelta(days=2))
    queue_due_summaries(db.session, now=NOW + timedelta(days=3))
    # Completion: the declined batch has no work left and is done.
    refresh_batch_statuses(db.session, now=NOW + timedelta(days=3), batch_ids=[declined.batch_id])
    db.session.commit()
    told = {
        (m.kind, m.batch_id): m.to_email
        for m in db.session.scalars(
            db.select(OutgoingMail).where(
                OutgoingMail.kind.in_(["decline_notice", "expiry_summary", "completion_notice"]),
                # The wave that closed the expiring batch told its end in the summary: that completion notice is
                # recorded cancelled, not sent.
                OutgoingMail.status != "cancelled",
            )
        )
    }
    assert told == {
        ("decline_notice", declined.batch_id): "head-of-hr@example.com",
        ("expiry_summary", expiring.batch_id): "head-of-hr@example.com",
        ("completion_notice", declined.batch_id): "head-of-hr@example.com",
    }


def test_without_a_named_address_the_owner_hears_of_declines_and_of_the_end_of_the_batch(app, world):
    from bulksign.batches.progress import refresh_batch_statuses
    from bulksign.signing.recipient_actions import decline, open_request
    from tests.support.signing_requests import make_sent_request

    sent = make_sent_request(now=NOW, owner=world["people"]["owner_a"])
    open_request(db.session, request_id=sent.id, now=NOW, ip=None, user_agent=None)
    decline(db.session, request_id=sent.id, now=NOW, reason="No", ip=None, user_agent=None)
    refresh_batch_statuses(db.session, now=NOW, batch_ids=[sent.batch_id])
    db.session.commit()
    told = [
        (m.kind, m.to_email)
        for m in db.session.scalars(db.select(OutgoingMail).order_by(OutgoingMail.id))
        if m.kind.endswith("notice")
    ]
    assert told == [("decline_notice", "owner_a@example.com"), ("completion_notice", "owner_a@example.com")]


# --- teams on the command line and the admin page, audited -------------------------------------


def test_cli_creates_a_team_and_a_manager_in_it_and_records_the_membership(app):
    from bulksign.models import MembershipChange, User

    runner = app.test_cli_runner()
    assert runner.invoke(args=["teams", "create", "Accounting"]).exit_code == 0
    result = runner.invoke(
        args=[
            "users",
            "create",
            "boss@example.com",
            "--role",
            "manager",
            "--team",
            "Accounting",
            "--password",
            "boss-password",
        ]
    )
    assert result.exit_code == 0, result.output
    assert "Created manager boss@example.com in Accounting." in result.output
    unknown = runner.invoke(args=["users", "create", "x@example.com", "--team", "Nope", "--password", "x-password"])
    assert unknown.exit_code == 1 and "No team named Nope" in unknown.output
    assert db.session.scalar(db.select(User).where(User.email == "x@example.com")) is None
    changes = db.session.scalars(db.select(MembershipChange).order_by(MembershipChange.id)).all()
    assert [(c.team_name, c.user_email, c.action, c.old_role, c.new_role, c.actor) for c in changes] == [
        (None, "boss@example.com", "role", None, "manager", "cli"),
        ("Accounting", "boss@example.com", "added", None, None, "cli"),
    ]
    assert runner.invoke(args=["teams", "remove", "Accounting", "boss@example.com"]).exit_code == 0
    assert db.session.scalars(db.select(MembershipChange.action).order_by(MembershipChange.id)).all() == [
        "role",
        "added",
        "removed",
    ]


def test_admins_manage_teams_and_roles_on_the_admin_page_and_every_change_names_who_made_it(app, world):
    admin, token = _web(app, world["people"]["admin"])
    assert admin.post("/admin/teams", data={"csrf_token": token, "name": "Legal"}).status_code == 302
    legal = db.session.scalar(db.select(Team).where(Team.name == "Legal"))
    added = admin.post(f"/admin/teams/{legal.id}/members", data={"csrf_token": token, "email": "staff_b@example.com"})
    assert added.status_code == 302
    promoted = admin.post(
        f"/admin/users/{world['people']['staff_b'].id}/role", data={"csrf_token": token, "role": "manager"}
    )
    assert promoted.status_code == 302 and world["people"]["staff_b"].role == "manager"
    page = admin.get("/admin/teams").get_data(as_text=True)
    assert "staff_b@example.com" in page and f"user:{world['people']['admin'].id} admin@example.com" in page
    assert "role staff → manager" in page and "added to" in page
    staff, staff_token = _web(app, world["people"]["staff_a"])
    assert staff.get("/admin/teams").status_code == 403
    assert staff.post("/admin/teams", data={"csrf_token": staff_token, "name": "Mine"}).status_code == 403


def test_role_changes_are_audited_with_memberships_and_the_admin_pages_narrow_them_to_a_user_or_a_team(app, world):
    from bulksign.people.access_audit import recent_changes
    from bulksign.people.users import UserError, set_role

    people = world["people"]
    odd = create_team(db.session, name="<b>R&D</b>", now=utcnow())
    add_member(db.session, team=odd, user=people["viewer_b"], by=people["admin"], now=utcnow())
    assert set_role(db.session, user=people["viewer_b"], role="staff", by=people["admin"], now=utcnow())
    assert not set_role(db.session, user=people["viewer_b"], role="staff", by=people["admin"], now=utcnow())
    with pytest.raises(UserError):
        set_role(db.session, user=people["admin"], role="viewer", by=people["admin"], now=utcnow())
    db.session.commit()
    mine = recent_changes(db.session, user_email="viewer_b@example.com")
    assert [(c.action, c.team_name, c.old_role, c.new_role) for c in mine] == [
        ("role", None, "viewer", "staff"),
        ("added", "<b>R&D</b>", None, None),
        ("added", "HR", None, None),
        ("role", None, None, "viewer"),
    ]
    assert [c.user_email for c in recent_changes(db.session, team_name="<b>R&D</b>")] == ["viewer_b@example.com"]

    admin, _token = _web(app, people["admin"])
    page = admin.get("/admin/teams?user=viewer_b@example.com").get_data(as_text=True)
    changes = page[page.index('id="access-changes"') :]
    assert changes.count("<tr data-action=") == 4 and "manager_a@example.com" not in changes
    assert "role viewer → staff" in changes and "created as viewer" in changes
    assert "&lt;b&gt;R&amp;D&lt;/b&gt;" in changes and "<b>R&D</b>" not in page  # a team's name is text, never markup
    by_team = admin.get("/admin/teams", query_string={"team": "HR"}).get_data(as_text=True)
    assert by_team[by_team.index('id="access-changes"') :].count("<tr data-action=") == 3  # HR's three members
    users_page = admin.get("/admin/").get_data(as_text=True)
    assert users_page[users_page.index('id="access-changes"') :].count("<tr data-action=") == 10


# --- outgoing webhooks ---------------------------------------------------------------------------


def test_a_teams_webhook_endpoint_hears_only_its_teams_events_and_an_organisation_wide_one_hears_all(app, world):
    from datetime import timedelta

    from bulksign.batches.states import transition
    from bulksign.integrations import webhooks_out
    from bulksign.models import WebhookDelivery

    hr_batch = batch_in_states(
        db.session,
        statuses=["opened"],
        now=NOW,
        name="HR contracts",
        user_id=world["people"]["staff_b"].id,
        team_id=world["team_b"],
    )
    endpoints = {
        name: webhooks_out.create_endpoint(
            db.session,
            url=f"https://{name}.example/hook",
            events=["request.signed"],
            user_id=None,
            now=NOW,
            team_id=team,
        ).id
        for name, team in [("accounting", world["team_a"]), ("hr", world["team_b"]), ("all", None)]
    }
    db.session.commit()
    webhooks_out.collect(
        db.session, after_event_id=None, batches_since=None, now=NOW, app_url="http://x", values_of=values_by_name
    )
    accounting_request = db.session.scalar(
        db.select(SigningRequest.id).where(
            SigningRequest.batch_id == world["batch_id"], SigningRequest.status == "sent"
        )
    )
    transition(db.session, accounting_request, frm="sent", to="opened", now=NOW)
    transition(db.session, accounting_request, frm="opened", to="signed", now=NOW)
    hr_request = db.session.scalar(db.select(SigningRequest.id).where(SigningRequest.batch_id == hr_batch.id))
    transition(db.session, hr_request, frm="opened", to="signed", now=NOW)
    db.session.commit()
    webhooks_out.collect(
        db.session,
        after_event_id=0,
        batches_since=NOW,
        now=NOW + timedelta(seconds=1),
        app_url="http://x",
        values_of=values_by_name,
    )
    heard = {}
    for delivery in db.session.scalars(db.select(WebhookDelivery)):
        heard.setdefault(delivery.endpoint_id, set()).add(delivery.payload["request"]["id"])
    assert heard == {
        endpoints["accounting"]: {accounting_request},
        endpoints["hr"]: {hr_request},
        endpoints["all"]: {accounting_request, hr_request},
    }
