"""Creating a batch: one transaction, every request pending, render jobs queued, one batch per key."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from bulksign.batches import retention
from bulksign.batches.batch_settings import BatchError, BatchSettings, settings_from_form
from bulksign.batches.creation import create_batch
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, Event, SigningRequest
from bulksign.recipients.validation import validate_recipients
from bulksign.work.pipeline import RENDER
from bulksign.work.queues import get_queue
from tests.support.clock import NOW
from tests.support.races import race
from tests.support.workers import queued

HTML = "<p>{{ name }} works as {{ position }}.</p>"


@pytest.fixture
def version(app, users):
    saved = create_template(db.session, name="Contract", html=HTML, user=users["staff"], now=NOW)
    db.session.commit()
    return saved.version


def rows(n: int, *, bad: int = 0):
    lines = ["email,name,position"] + [f"user{i}@example.com,User {i},Engineer" for i in range(n)]
    lines += [f"broken{i}@,Bad {i},Engineer" for i in range(bad)]
    report = validate_recipients(
        "\n".join(lines).encode(), filename="r.csv", variables=["name", "position"], keep_rows=True
    )
    return report.recipients


def test_creating_a_batch_inserts_pending_requests_and_queues_one_render_job_each(app, version, users):
    app.config["RENDER_CHUNK_SIZE"] = 10  # smaller than the batch, so the window holds only part of it
    result = create_batch(
        db.session,
        user=users["staff"],
        template_version=version,
        rows=rows(25, bad=2),
        settings=BatchSettings(name="November contracts"),
        now=NOW,
    )
    # The batch's window is queued (two chunks of ten); the next chunk goes when one is claimed (work/pipeline.py).
    assert result.created and result.total_count == 25 and result.enqueued == 20
    batch = db.session.get(Batch, result.batch.id)
    assert batch.status == "processing" and batch.started_at == NOW and batch.total_count == 25
    requests = db.session.scalars(select(SigningRequest).where(SigningRequest.batch_id == batch.id)).all()
    assert {r.status for r in requests} == {"pending"}
    first = min(requests, key=lambda r: r.row_number)
    assert (first.row_number, first.email, first.name, first.data) == (
        2,
        "user0@example.com",
        "User 0",
        {"name": "User 0", "position": "Engineer"},
    )
    first_twenty = sorted(r.id for r in requests)[:20]
    assert queued(RENDER, [r.id for r in requests]) == set(first_twenty)
    assert db.session.scalar(select(func.count()).select_from(Event).where(Event.type == "batch.created")) == 1


def test_the_same_idempotency_key_returns_the_first_batch(version, users):
    first = create_batch(
        db.session,
        user=users["staff"],
        template_version=version,
        rows=rows(3),
        settings=BatchSettings(name="A"),
        now=NOW,
        idempotency_key="key-1",
    )
    again = create_batch(
        db.session,
        user=users["staff"],
        template_version=version,
        rows=rows(5),
        settings=BatchSettings(name="B"),
        now=NOW,
        idempotency_key="key-1",
    )
    assert not again.created and again.batch.id == first.batch.id and again.total_count == 3
    other_user = create_batch(
        db.session,
        user=users["admin"],
        template_version=version,
        rows=rows(2),
        settings=BatchSettings(name="C"),
        now=NOW,
        idempotency_key="key-1",
    )
    assert other_user.created
    assert db.session.scalar(select(func.count()).select_from(Batch)) == 2
    assert db.session.scalar(select(func.count()).select_from(SigningRequest)) == 5


def test_two_concurrent_creations_with_one_key_make_one_batch(app, version, users):
    recipients, user_id, version_id = rows(200), users["staff"].id, version.id

    def create(_n: int) -> int:
        from bulksign.models import TemplateVersion, User

        user, tv = db.session.get(User, user_id), db.session.get(TemplateVersion, version_id)
        return create_batch(
            db.session,
            user=user,
            template_version=tv,
            rows=recipients,
            settings=BatchSettings(name="Twice"),
            now=NOW,
            idempotency_key="double-click",
        ).batch.id

    results = race(app, create, callers=2)
    assert results[0] == results[1]
    assert db.session.scalar(select(func.count()).select_from(SigningRequest)) == 200


def test_a_batch_needs_at_least_one_valid_row(version, users):
    with pytest.raises(BatchError, match="no valid rows"):
        create_batch(
            db.session,
            user=users["staff"],
            template_version=version,
            rows=(),
            settings=BatchSettings(name="Empty"),
            now=NOW,
        )


def test_settings_have_the_documented_defaults():
    settings = settings_from_form({}, default_name="Contracts")
    assert (
        settings.name,
        settings.deadline_days,
        settings.reminder_days,
        settings.max_reminders,
        settings.language,
        settings.quiet_hours_start,
        settings.timezone,
    ) == ("Contracts", 7, (2, 4), 2, "en", None, "UTC")  # a reminder for each day given


@pytest.mark.parametrize(
    "form, field",
    [
        ({"max_reminders": "6"}, "max_reminders"),
        ({"max_reminders": "three"}, "max_reminders"),
        ({"deadline_days": "0"}, "deadline_days"),
        ({"reminder_days": "2,9"}, "reminder_days"),
        ({"reply_to": "boss@gmial.com"}, "reply_to"),
        ({"language": "de"}, "language"),
        ({"quiet_hours_start": "22"}, "quiet_hours_start"),
        ({"quiet_hours_start": "22", "quiet_hours_end": "7", "timezone": "Mars/Olympus"}, "timezone"),
        ({"keep_signed_days": "0"}, "keep_signed_days"),
        ({"keep_unsigned_days": "forever"}, "keep_unsigned_days"),
    ],
)
def test_bad_settings_name_the_field(form, field):
    with pytest.raises(BatchError) as caught:
        settings_from_form(form, default_name="x")
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        (
            {"deadline_days": "5", "reminder_days": "2, 9, 5"},
            "reminder_days",
            "Reminder days must come before the deadline (day 5); day 5 is not.",
        ),
        (
            {"reminder_days": "1,2,3", "max_reminders": "2"},
            "max_reminders",
            "Reminders on days 1, 2, 3 need a maximum of at least 3; raise it, or remove days.",
        ),
    ],
)
def test_reminder_days_and_their_maximum_must_agree_with_the_deadline(form, field, message):
    with pytest.raises(BatchError) as caught:
        settings_from_form(form, default_name="x")
    assert (caught.value.field, caught.value.message) == (field, message)


def test_a_blank_maximum_is_a_reminder_for_each_day_and_zero_is_none():
    assert settings_from_form({"reminder_days": "1,2,3,4"}, default_name="x").max_reminders == 4
    assert settings_from_form({"reminder_days": "1,2", "max_reminders": "0"}, default_name="x").max_reminders == 0


def test_quiet_hours_and_reminders_are_kept(version, users):
    settings = settings_from_form(
        {
            "name": "Q",
            "reminder_days": "1, 3",
            "max_reminders": "2",
            "quiet_hours_start": "21",
            "quiet_hours_end": "8",
            "timezone": "Europe/Moscow",
            "language": "ru",
            "reply_to": "HR@Example.com",
        },
        default_name="x",
    )
    batch = create_batch(
        db.session, user=users["staff"], template_version=version, rows=rows(1), now=NOW, settings=settings
    ).batch
    assert (
        batch.reminder_days,
        batch.max_reminders,
        batch.quiet_hours_start,
        batch.quiet_hours_end,
        batch.timezone,
        batch.language,
        batch.reply_to,
    ) == ([1, 3], 2, 21, 8, "Europe/Moscow", "ru", "HR@example.com")


def test_the_batch_s_own_retention_periods_are_committed_with_it(version, users):
    settings = settings_from_form({"keep_signed_days": "30", "keep_unsigned_days": "7"}, default_name="Kept")
    batch_id = create_batch(
        db.session, user=users["staff"], template_version=version, rows=rows(1), now=NOW, settings=settings
    ).batch.id
    db.session.rollback()  # nothing left uncommitted: the periods came with the batch's own commit
    policy = retention.policies(db.session, [batch_id])[batch_id]
    assert (policy.keep_signed_days, policy.keep_unsigned_days) == (30, 7)


def test_when_redis_is_down_the_batch_is_still_created_and_left_for_the_reconciler(make_app):
    from bulksign.people.users import create_user
    from tests.support.services import free_port

    app = make_app(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    with app.app_context():
        user = create_user(db.session, email="s@example.com", password="staff-password", role="staff", now=NOW)
        version = create_template(db.session, name="T", html=HTML, user=user, now=NOW).version
        db.session.commit()
        result = create_batch(
            db.session, user=user, template_version=version, rows=rows(3), settings=BatchSettings(name="R"), now=NOW
        )
        assert result.created and result.enqueued == 0
        assert set(db.session.scalars(select(SigningRequest.status))) == {"pending"}


def test_a_big_batch_queues_one_fan_out_job_that_queues_the_renders(version, users, run_jobs, monkeypatch):
    from bulksign.batches import creation

    monkeypatch.setattr(creation, "INLINE_ENQUEUE_MAX", 5)
    result = create_batch(
        db.session,
        user=users["staff"],
        template_version=version,
        rows=rows(8),
        settings=BatchSettings(name="Big"),
        now=NOW,
    )
    assert result.enqueued == 0 and get_queue("pdf").count == 0
    assert get_queue("default").job_ids == [f"enqueue-renders-{result.batch.id}"]
    run_jobs("default")
    ids = db.session.scalars(select(SigningRequest.id)).all()
    assert queued(RENDER, ids) == set(ids) and len(ids) == 8
