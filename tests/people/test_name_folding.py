"""Names and addresses compare the same way in every database. SQLite's own ``lower()`` folds only ASCII: a
Cyrillic team name found by ``lower()`` was created and then never found again (a second "create" ended in a
traceback on the CLI and a 500 on the admin page), and an address with capital Cyrillic letters was not found by
the erasure of the same address typed in small ones. Team names are found by a key Python folds
(``str.casefold``), stored beside the name and unique; SQLite's ``lower()`` is Python's."""

from __future__ import annotations

import pytest
from flask_migrate import upgrade
from sqlalchemy import select

from bulksign.app import create_app
from bulksign.core.extensions import db
from bulksign.models import Team, TeamMember, User, utcnow
from bulksign.people.users import create_user
from tests.support.accounts import ADMIN
from tests.support.web import AuthActions


@pytest.fixture(params=["postgresql", "sqlite"])
def any_app(request, tmp_path):
    """An app with an admin: on PostgreSQL through PgBouncer (the ``app`` fixture), or on the embedded SQLite
    default, its schema made by the migrations as ``make run`` makes it."""
    if request.param == "postgresql":
        app = request.getfixturevalue("app")
        yield app
        return
    redis_server, smtp_server = request.getfixturevalue("redis_server"), request.getfixturevalue("smtp_server")
    app = create_app(
        {
            "TESTING": True,
            "SECRET_KEY": "test-secret-key",
            "DATABASE_URL": f"sqlite:///{tmp_path}/bulksign.db",
            "REDIS_URL": redis_server.url,
            "MAIL_PORT": smtp_server.port,
            "STORAGE_URL": str(tmp_path / "storage"),
            "VAR_DIR": str(tmp_path),
            "LOG_JSON": False,
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
        }
    )
    with app.app_context():
        upgrade()
        yield app
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def admin(any_app):
    user = create_user(db.session, email=ADMIN[0], password=ADMIN[1], role="admin", now=utcnow())
    db.session.commit()
    return user


def test_a_cyrillic_team_is_found_by_its_name_in_any_case_and_made_only_once(any_app, admin):
    runner = any_app.test_cli_runner()
    created = runner.invoke(args=["teams", "create", "Отдел кадров"])
    assert created.exit_code == 0 and "Created team Отдел кадров." in created.output, created.output
    updated = runner.invoke(args=["teams", "update", "отдел кадров", "--require-approval"])
    assert updated.exit_code == 0, updated.output
    assert "New batches of Отдел кадров now wait for approval." in updated.output
    added = runner.invoke(args=["teams", "add", "ОТДЕЛ  КАДРОВ", ADMIN[0]])
    assert added.exit_code == 0 and f"{ADMIN[0]} is now in Отдел кадров." in added.output, added.output
    joined = runner.invoke(
        args=["users", "create", "clerk@example.com", "--password", "long-enough", "--team", "отдел кадров"]
    )
    assert joined.exit_code == 0 and "in Отдел кадров." in joined.output, joined.output
    held = runner.invoke(args=["teams", "retention", "ОТДЕЛ КАДРОВ"])
    assert held.exit_code == 0, held.output
    # Folded fully, not lower-cased: "ß" is "ss" (PostgreSQL's lower() keeps it).
    assert runner.invoke(args=["teams", "create", "Straße"]).exit_code == 0
    found = runner.invoke(args=["teams", "update", "STRASSE", "--no-require-approval"])
    assert found.exit_code == 0 and "New batches of Straße go out without approval already." in found.output

    again = runner.invoke(args=["teams", "create", "отдел КАДРОВ"])
    assert again.exit_code == 1 and isinstance(again.exception, SystemExit)
    assert "A team named отдел КАДРОВ already exists" in again.output and "Traceback" not in again.output
    db.session.remove()
    team, _ = db.session.scalars(select(Team).order_by(Team.id)).all()
    assert (team.name, team.require_approval) == ("Отдел кадров", True)
    members = db.session.scalars(select(User.email).join(TeamMember, TeamMember.user_id == User.id)).all()
    assert sorted(members) == [ADMIN[0], "clerk@example.com"]


def test_the_admin_page_says_the_team_exists_instead_of_failing(any_app, admin):
    client = any_app.test_client()
    AuthActions(client).login_admin()
    page = client.get("/admin/teams")
    token = page.data.split(b'name="csrf_token" value="')[1].split(b'"')[0].decode()
    first = client.post("/admin/teams", data={"csrf_token": token, "name": "Отдел кадров"}, follow_redirects=True)
    assert first.status_code == 200 and "Team Отдел кадров created" in first.get_data(as_text=True)
    for name in ("Отдел кадров", "ОТДЕЛ кадров"):
        again = client.post("/admin/teams", data={"csrf_token": token, "name": name}, follow_redirects=True)
        assert again.status_code == 200, again.status_code
        assert f"A team named {name} already exists" in again.get_data(as_text=True)
    assert db.session.scalar(select(Team.name)) == "Отдел кадров"
    assert len(db.session.scalars(select(Team)).all()) == 1


def test_erasing_an_address_finds_it_whatever_the_case_of_its_cyrillic_letters(any_app, admin):
    from bulksign.models import SigningRequest
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    batch = batch_in_states(db.session, statuses=["sent", "sent"], now=NOW, user_id=admin.id, team_id=None)
    ivan, other = db.session.scalars(select(SigningRequest).where(SigningRequest.batch_id == batch.id)).all()
    ivan.email = "ИВАН@почта.рф"
    db.session.commit()
    ivan_id, other_id = ivan.id, other.id
    erased = any_app.test_cli_runner().invoke(args=["privacy", "erase", "иван@почта.рф"])
    assert erased.exit_code == 0, erased.output
    db.session.remove()
    assert db.session.get(SigningRequest, ivan_id).email != "ИВАН@почта.рф"
    assert db.session.get(SigningRequest, ivan_id).status == "cancelled"
    assert db.session.get(SigningRequest, other_id).status == "sent"
