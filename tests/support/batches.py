"""Make a batch with its requests directly, for pipeline tests (no upload involved), or from a recipients file's text
through the file check and batch creation as the new-batch page does."""

from __future__ import annotations

from bulksign.batches import counts as batch_counts
from bulksign.batches.batch_settings import BatchSettings, party_settings_from_form
from bulksign.batches.creation import create_batch
from bulksign.core.extensions import db
from bulksign.doc_templates.columns import needed_columns
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, SigningRequest, TemplateVersion
from bulksign.people.users import create_user
from bulksign.recipients.validation import validate_recipients

CONTRACT = (
    '<meta charset="utf-8"><h1 style="font-family:\'DejaVu Serif\'">Contract for {{ name }}</h1>'
    "<p>Salary: {{ salary }}</p>"
)
#: A contract that runs over two pages.
TWO_PAGES = (
    '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'"><h1>Договор {{ number }}</h1>'
    "<p>Работник: {{ name }}.</p>"
    + "".join(f"<p>Пункт {i}. Условия договора.</p>" for i in range(45))
    + "<p>Конец договора.</p></body>"
)


def make_batch(
    *,
    now,
    user=None,
    recipients: list[tuple[str, str]] | int = 3,
    html: str = CONTRACT,
    name: str = "Employment contract",
    kind: str = "html",
    file: bytes | None = None,
    version: TemplateVersion | None = None,
    **batch_fields,
) -> int:
    """The id of a committed pending batch of ``recipients`` ((email, name) pairs or a count) on a new template
    (``kind`` and ``file``: a template of another kind, e.g. a .docx), or on ``version`` (one made elsewhere, e.g.
    on the web form)."""
    if user is None:
        user = create_user(db.session, email="owner@example.com", password="owner-password", role="staff", now=now)
    if isinstance(recipients, int):
        recipients = [(f"person{i}@example.com", f"Person {i}") for i in range(recipients)]
    if version is None:
        version = create_template(db.session, name=name, html=html, user=user, now=now, kind=kind, file=file).version
    batch_fields.setdefault("team_id", version.template.team_id)  # as batch creation does: the template's team
    batch = Batch(
        name=name,
        template_version_id=version.id,
        created_by_id=user.id,
        total_count=len(recipients),
        created_at=now,
        **batch_fields,
    )
    db.session.add(batch)
    db.session.flush()
    db.session.add_all(
        [
            SigningRequest(
                batch_id=batch.id,
                row_number=i + 2,
                email=email,
                name=person,
                data={"salary": str(1000 + i)},
                status_changed_at=now,
                created_at=now,
            )
            for i, (email, person) in enumerate(recipients)
        ]
    )
    batch_counts.rebuild(db.session, batch_ids=[batch.id])
    db.session.commit()
    return batch.id


def request_ids(batch_id: int) -> list[int]:
    from sqlalchemy import select

    return list(
        db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )


def requests_of(batch_id: int) -> list[SigningRequest]:
    """Fresh from the database (the workers changed them)."""
    from sqlalchemy import select

    db.session.expire_all()
    return list(
        db.session.scalars(
            select(SigningRequest).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )


def run_worker(app, *queues: str, max_jobs: int | None = None) -> int:
    """A real burst worker inside ``app`` (for apps made with ``make_app(...)`` settings)."""
    from tests.support.workers import run_burst_worker

    with app.app_context():
        return run_burst_worker(*queues, max_jobs=max_jobs)


def worker_env(app) -> dict:
    """Environment for a ``flask jobs worker`` subprocess on the same services as ``app``."""
    import os

    c = app.config
    return {
        **os.environ,
        "FLASK_APP": "wsgi",
        "DATABASE_URL": c["DATABASE_URL"],
        "REDIS_URL": c["REDIS_URL"],
        "SECRET_KEY": c["SECRET_KEY"],
        "MAIL_PORT": str(c["MAIL_PORT"]),
        "MAIL_RATE_PER_MINUTE": "0",
        "STORAGE_URL": c["STORAGE_URL"],
        "APP_URL": c["APP_URL"],
        "BULKSIGN_VAR_DIR": c["VAR_DIR"],
    }


def batch_from_file(*, user, version: TemplateVersion, rows: str, now, form: dict | None = None, **settings) -> Batch:
    """A batch of the CSV ``rows`` on ``version``, checked as the new-batch page checks a file (``form``: that page's
    parties), named "Agreements" unless ``settings`` say otherwise. Not committed, nothing rendered."""
    signers = party_settings_from_form(form or {}, version=version)
    report = validate_recipients(
        rows.encode(), filename="r.csv", variables=needed_columns(version), keep_rows=True, **signers.file_check
    )
    assert not report.errors, report.errors
    return create_batch(
        db.session,
        user=user,
        template_version=version,
        rows=report.recipients,
        settings=BatchSettings(**{"name": "Agreements", **settings}),
        now=now,
        party_settings=signers,
    ).batch
