"""An admin in no team chooses the team of a new template or batch, so its staff see it."""

from __future__ import annotations

import io
import re

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, DocumentTemplate, utcnow
from bulksign.people.teams import create_team, remove_member, team_by_name
from tests.support.accounts import ADMIN, DEFAULT_TEAM
from tests.support.clock import NOW
from tests.support.web import csrf_from


@pytest.fixture
def admin_in_no_team(users):
    """The admin leaves "Default"; a second team, "Sales", exists."""
    remove_member(db.session, team=team_by_name(db.session, name=DEFAULT_TEAM), user=users["admin"], by=None, now=NOW)
    create_team(db.session, name="Sales", now=NOW)
    db.session.commit()
    return users["admin"]


def _team_options(html: str) -> list[str]:
    select_ = re.search(r'<select name="team_id">(.*?)</select>', html, re.S)
    return re.findall(r">([^<]+)</option>", select_.group(1)) if select_ else []


def test_an_admin_in_no_team_picks_the_templates_team_and_its_staff_see_it(client, auth, admin_in_no_team, users):
    auth.login(*ADMIN)
    page = client.get("/templates/new")
    assert "Team (who may use it)" in page.get_data(as_text=True)
    assert _team_options(page.get_data(as_text=True)) == ["Default", "Sales"]
    default_id = team_by_name(db.session, name=DEFAULT_TEAM).id
    saved = client.post(
        "/templates/new",
        data={
            "csrf_token": csrf_from(page),
            "name": "Offer letter",
            "kind": "html",
            "html": "<p>Dear {{ name }}</p>",
            "team_id": str(default_id),
        },
    )
    assert saved.status_code == 302, saved.get_data(as_text=True)[:500]
    template = db.session.scalar(select(DocumentTemplate).where(DocumentTemplate.name == "Offer letter"))
    assert template.team_id == default_id
    auth.logout()
    auth.login()  # staff in "Default"
    assert "Offer letter" in client.get("/templates/").get_data(as_text=True)


def test_a_staff_member_in_one_team_is_not_asked_and_an_admin_in_one_team_of_one_neither(client, auth, users):
    auth.login()
    assert "Team (who may use it)" not in client.get("/templates/new").get_data(as_text=True)
    auth.logout()
    auth.login(*ADMIN)
    assert "Team (who may use it)" not in client.get("/templates/new").get_data(as_text=True)


def test_a_batch_of_an_admin_in_no_team_goes_to_the_templates_team_unless_another_is_chosen(
    client, auth, admin_in_no_team, users
):
    template = create_template(
        db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=utcnow()
    ).template
    db.session.commit()
    auth.login(*ADMIN)
    page = client.get(f"/batches/new?template_id={template.id}")
    assert _team_options(page.get_data(as_text=True)) == ["The template's team", "Default", "Sales"]
    sales = team_by_name(db.session, name="Sales").id
    for chosen, expected in (("", template.team_id), (str(sales), sales)):
        page = client.get(f"/batches/new?template_id={template.id}")
        preview = client.post(
            "/batches/new/validate",
            content_type="multipart/form-data",
            data={
                "csrf_token": csrf_from(page),
                "template_id": template.id,
                "file": (io.BytesIO(b"email,name\nanna@example.com,Anna\n"), "people.csv"),
            },
        )
        upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)
        token = re.search(r'name="form_token" value="([0-9a-f]+)"', page.get_data(as_text=True)).group(1)
        made = client.post(
            "/batches/new",
            data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": token, "team_id": chosen},
        )
        assert made.status_code == 303, made.get_data(as_text=True)[:500]
        batch_id = int(made.headers["Location"].rsplit("/", 1)[1])
        assert db.session.get(Batch, batch_id).team_id == expected


def test_the_api_takes_the_team_of_an_admin_in_no_team(client, admin_in_no_team, users):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=admin_in_no_team, name="t", now=NOW).secret
    db.session.commit()
    sales = team_by_name(db.session, name="Sales").id
    made = client.post(
        "/api/v1/templates",
        headers={"Authorization": f"Bearer {key}"},
        json={"name": "Policy", "html": "<p>{{ name }}</p>", "team_id": sales},
    )
    assert made.status_code == 201, made.get_json()
    assert made.get_json()["team_id"] == sales
