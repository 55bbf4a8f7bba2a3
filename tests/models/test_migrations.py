"""The migrations build the same schema as the models, on PostgreSQL and on SQLite, and roll back."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade
from sqlalchemy import create_engine, inspect, select, text

from bulksign.app import create_app
from bulksign.core.extensions import db
from tests.support.services import postgres_database


@pytest.fixture(params=["postgresql", pytest.param("sqlite", marks=pytest.mark.sqlite)])
def empty_database_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/migrations.db"
    else:
        # `flask db upgrade` in production goes through PgBouncer (transaction pooling) like everything else.
        with postgres_database() as url:
            yield request.getfixturevalue("pgbouncer").url_for(url)


def _bare_app(database_url, redis_server, folder):
    """An app on an empty database, its schema left to the migrations."""
    return create_app(
        {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_server.url,
            "SECRET_KEY": "x",
            "VAR_DIR": str(folder),
            "TESTING": True,
        }
    )


def test_migrations_upgrade_to_the_models_and_downgrade_to_nothing(empty_database_url, redis_server, tmp_path):
    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"], **app.config["SQLALCHEMY_ENGINE_OPTIONS"])
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": False}), db.metadata)
        assert diff == [], "models and migrations differ: run `flask db migrate`"
        assert {"users", "batches", "signing_requests", "events", "outgoing_mails"} <= set(
            inspect(engine).get_table_names()
        )
        downgrade(revision="base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        engine.dispose()
        db.engine.dispose()


def test_the_counters_migration_back_fills_every_status_of_every_batch(empty_database_url, redis_server, tmp_path):
    from bulksign.batches import counts as batch_counts
    from bulksign.models.status import Status
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        batches = [
            batch_in_states(db.session, statuses=["sent", "signed", "sent", "failed"], now=NOW, name="A").id,
            batch_in_states(db.session, statuses=["pending"] * 3, now=NOW, name="B").id,
            batch_in_states(db.session, statuses=[], now=NOW, name="Empty").id,
        ]
        truth = batch_counts.recount(db.session, batches)
        db.session.remove()
        # Back to the schema without counters, with the requests kept, and up again: the back-fill runs.
        downgrade(revision="6d124784f55f")
        upgrade()
        assert batch_counts.counters(db.session, batches) == truth
        # Twelve rows per batch, zeros and the empty batch included: a move only ever UPDATEs.
        assert db.session.scalar(text("SELECT count(*) FROM batch_status_counts")) == 3 * len(Status)
        db.session.remove()
        downgrade(revision="base")
        db.engine.dispose()


def test_the_teams_migration_puts_existing_users_and_data_in_a_default_team(empty_database_url, redis_server, tmp_path):
    from bulksign.models import Batch, DocumentTemplate, Team, TeamMember
    from bulksign.people.users import create_user
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        owner = create_user(db.session, email="owner@example.com", password="owner-password", role="staff", now=NOW)
        db.session.commit()
        owner_id = owner.id
        batch_id = batch_in_states(db.session, statuses=["sent"], now=NOW, user_id=owner_id, team_id=None).id
        db.session.remove()
        # Back to the schema before teams, with the data kept, and up again.
        downgrade(revision="b7c1d2e3f4a5")
        upgrade()
        team = db.session.scalar(select(Team))
        assert team.name == "Default"
        assert db.session.scalars(select(TeamMember.user_id)).all() == [owner_id]
        assert db.session.get(Batch, batch_id).team_id == team.id
        assert set(db.session.scalars(select(DocumentTemplate.team_id))) == {team.id}
        db.session.remove()
        db.engine.dispose()


def test_the_outcomes_migration_settles_dispatched_batches_by_what_their_requests_say(
    empty_database_url, redis_server, tmp_path
):
    """``completed`` meant "every invitation dispatched": the migration tells the batches still awaiting signatures
    from those everyone signed and those nobody can sign any more."""
    from bulksign.models import Batch
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        made = {
            "all_signed": (["signed", "signed"], "completed"),
            "closed": (["signed", "expired"], "completed"),
            "awaiting_signatures": (["sent", "signed"], "completed"),
            "partially_failed": (["sent", "bounced"], "partially_failed"),
            "closed, failed": (["failed"], "partially_failed"),
            "processing": (["pending"], "processing"),
        }
        ids = {name: batch_in_states(db.session, statuses=s, now=NOW, name=name).id for name, (s, _) in made.items()}
        db.session.remove()
        downgrade(revision="b2d4f6a8c0e1")
        for name, (_, old) in made.items():
            db.session.execute(
                text("UPDATE batches SET status = :s, finished_at = :t WHERE id = :i"),
                {"s": old, "t": NOW, "i": ids[name]},
            )
        db.session.commit()
        upgrade()
        settled = {name: db.session.get(Batch, batch_id) for name, batch_id in ids.items()}
        assert {name: b.status for name, b in settled.items()} == {name: name.split(",")[0] for name in made}
        assert [name for name, b in settled.items() if b.settled_at] == ["all_signed", "closed", "closed, failed"]
        db.session.remove()
        downgrade(revision="b2d4f6a8c0e1")
        assert db.session.scalar(text("SELECT count(*) FROM batches WHERE status = 'completed'")) == 3
        db.session.remove()
        downgrade(revision="base")
        db.engine.dispose()


def test_the_parties_migration_gives_every_request_its_recipient_in_the_state_its_request_stands_for(
    empty_database_url, redis_server, tmp_path
):
    """Existing requests keep their links (the request's own) and get a ``recipient`` party at step 0 whose state
    and times are the request's: a cancelled request's party stands where the request was when it was cancelled."""
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    statuses = ["pending", "generated", "sent", "opened", "signed", "declined", "expired", "bounced", "failed"]
    statuses += ["cancelled", "cancelled", "cancelled"]
    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        batch_id = batch_in_states(db.session, statuses=statuses, now=NOW).id
        db.session.remove()
        downgrade(revision="b5e1d7a3c9f2")
        ids = db.session.scalars(text("SELECT id FROM signing_requests ORDER BY id")).all()
        # Cancelled before its invitation went out, after it was opened, after it was sent.
        db.session.execute(
            text("UPDATE signing_requests SET sent_at = NULL, opened_at = NULL WHERE status = 'cancelled'")
        )
        db.session.execute(text("UPDATE signing_requests SET sent_at = :t WHERE id = :a"), {"t": NOW, "a": ids[-1]})
        db.session.execute(
            text("UPDATE signing_requests SET sent_at = :t, opened_at = :t WHERE id = :a"), {"t": NOW, "a": ids[-2]}
        )
        db.session.commit()
        upgrade()
        found = db.session.execute(
            text(
                "SELECT request_id, role, step, status, invited_at FROM parties WHERE batch_id = :b ORDER BY request_id"
            ),
            {"b": batch_id},
        ).all()
        assert [r.request_id for r in found] == ids
        assert {(r.role, r.step) for r in found} == {("recipient", 0)}
        assert [r.status for r in found] == [
            "waiting", "waiting", "invited", "opened", "signed", "declined", "invited", "invited", "waiting",
            "waiting", "opened", "invited",
        ]  # fmt: skip
        assert found[2].invited_at is not None
        db.session.remove()
        downgrade(revision="b5e1d7a3c9f2")
        assert "parties" not in inspect(db.engine).get_table_names()
        db.session.remove()
        downgrade(revision="base")
        db.engine.dispose()


def test_the_roles_migration_keeps_every_earlier_version_signed_by_its_recipient_alone(
    empty_database_url, redis_server, tmp_path
):
    """A version saved before roles were stored is single-signer: its ``{{ signature_date }}`` stays a column."""
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        batch_in_states(db.session, statuses=["sent"], now=NOW)
        db.session.remove()
        downgrade(revision="a7c3e9f1b2d4")
        upgrade()
        assert db.session.scalars(text("SELECT roles FROM template_versions")).all() in (
            [["recipient"]],
            ['["recipient"]'],
        )
        db.session.remove()
        downgrade(revision="base")
        db.engine.dispose()


def test_the_link_codes_migration_keeps_one_owner_per_code_and_its_downgrade_drops_the_links_codes(
    empty_database_url, redis_server, tmp_path
):
    """A code belongs to a request or to a countersigner's link, never both nor neither (checked by the database on
    both engines); going back, a link's codes go (they have no request to stay under) and a request's stay."""
    from sqlalchemy.exc import IntegrityError

    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        batch_id = batch_in_states(db.session, statuses=["sent"], now=NOW).id
        request_id = db.session.scalar(text("SELECT id FROM signing_requests"))
        db.session.execute(
            text(
                "INSERT INTO countersign_links (id, batch_id, email, token_hash, token_nonce, digest_count, created_at)"
                " VALUES (1, :b, 'hr@acme.example', 'h', 'n', 0, :t)"
            ),
            {"b": batch_id, "t": NOW},
        )
        code = (
            "INSERT INTO one_time_codes (request_id, countersign_link_id, channel, destination, nonce, code_hash,"
            " created_at, expires_at, attempts) VALUES (:r, :l, 'email', 'a@example.com', 'n', 'h', :t, :t, 0)"
        )
        db.session.execute(text(code), {"r": request_id, "l": None, "t": NOW})
        db.session.execute(text(code), {"r": None, "l": 1, "t": NOW})
        db.session.commit()
        for owners in ({"r": request_id, "l": 1}, {"r": None, "l": None}):
            with pytest.raises(IntegrityError):
                db.session.execute(text(code), {**owners, "t": NOW})
            db.session.rollback()
        db.session.remove()
        downgrade(revision="c7d9e1f3a5b8")
        assert db.session.execute(text("SELECT request_id FROM one_time_codes")).scalars().all() == [request_id]
        db.session.remove()
        downgrade(revision="base")
        db.engine.dispose()


def test_the_team_keys_migration_folds_every_name_and_tells_apart_two_that_fold_alike(
    empty_database_url, redis_server, tmp_path
):
    """Before the keys, SQLite let "Отдел кадров" and "отдел кадров" both be made (its lower() saw two names): the
    older keeps its name, the newer gets its id added, and every team is found by its folded key after."""
    from bulksign.models import Team
    from bulksign.people.teams import team_by_name

    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        db.session.remove()
        downgrade(revision="b8f0a2c4e6d1")
        for name in ("Отдел кадров", "Sales", "отдел кадров"):
            db.session.execute(text("INSERT INTO teams (name, created_at) VALUES (:n, CURRENT_TIMESTAMP)"), {"n": name})
        db.session.commit()
        db.session.remove()
        upgrade()
        assert [(t.name, t.name_key) for t in db.session.scalars(select(Team).order_by(Team.id))] == [
            ("Отдел кадров", "отдел кадров"),
            ("Sales", "sales"),
            ("отдел кадров (3)", "отдел кадров (3)"),
        ]
        assert team_by_name(db.session, name="ОТДЕЛ КАДРОВ").id == 1
        db.session.remove()
        downgrade(revision="base")
        db.engine.dispose()


def test_the_mail_party_migration_finds_each_party_mails_party_by_its_message_id(
    empty_database_url, redis_server, tmp_path
):
    """Invitations and reminders name their party's id, decline and completion mails its request and role; a role
    that begins like another's is told apart, and every other kind of mail names no party."""
    from bulksign.models import Party
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    app = _bare_app(empty_database_url, redis_server, tmp_path)
    with app.app_context():
        upgrade()
        batch_id = batch_in_states(db.session, statuses=["sent", "sent"], now=NOW).id
        first, second = db.session.scalars(text("SELECT id FROM signing_requests ORDER BY id")).all()
        parties = {}
        for request_id, role in ((first, "hr"), (first, "hr_lead"), (second, "hr")):
            party = Party(request_id=request_id, batch_id=batch_id, role=role, step=1, email=f"{role}@acme.example")
            db.session.add(party)
            db.session.flush()
            parties[request_id, role] = party.id
        db.session.commit()
        db.session.remove()
        downgrade(revision="a6c8e0b2d4f7")
        mails = {
            f"party-invitation-{parties[first, 'hr_lead']}-abc": ("party_invitation", first),
            f"party-reminder-{parties[second, 'hr']}-abc-1": ("party_reminder", second),
            f"party-declined-{first}-hr": ("party_declined", first),
            f"party-completed-{first}-hr_lead": ("party_completed", first),
            f"invitation-{first}-abc": ("invitation", first),
        }
        for key, (kind, request_id) in mails.items():
            db.session.execute(
                text(
                    "INSERT INTO outgoing_mails (request_id, batch_id, kind, message_id, to_email, subject, status,"
                    " attempts, created_at, attachments) VALUES (:r, :b, :k, :m, 'a@example.com', '', 'sent', 0, :t,"
                    " '[]')"
                ),
                {"r": request_id, "b": batch_id, "k": kind, "m": f"<{key}@bulksign.local>", "t": NOW},
            )
        db.session.commit()
        db.session.remove()
        upgrade()
        found = dict(db.session.execute(text("SELECT kind, party_id FROM outgoing_mails")).all())
        assert found == {
            "party_invitation": parties[first, "hr_lead"],
            "party_reminder": parties[second, "hr"],
            "party_declined": parties[first, "hr"],
            "party_completed": parties[first, "hr_lead"],
            "invitation": None,
        }
        db.session.remove()
        downgrade(revision="base")
        db.engine.dispose()
