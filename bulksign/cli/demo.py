"""Demo data so that a newcomer can click through at once: an admin, a one-party and a two-party template (the
employer countersigns), a recipients file."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import click
from flask import current_app
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.extensions import db
from bulksign.core.spreadsheets import csv_writer
from bulksign.doc_templates.versions import create_template, save_parties
from bulksign.models import DocumentTemplate, User, utcnow
from bulksign.people.users import create_user, normalise_email

DEMO_TEMPLATE_NAME = "Employment agreement (demo)"
DEMO_HTML = Path(__file__).with_name("demo_files") / "contract.html"
#: The same contract countersigned: the employee signs, then the employer (one fixed person for every batch).
DEMO_TWO_PARTY_NAME = "Employment agreement, countersigned (demo)"
DEMO_EMPLOYER = "director@example.com"
DEMO_PARTIES = [
    {"key": "recipient", "labels": {"en": "Employee", "ru": "Работник"}, "source": "row"},
    {
        "key": "employer",
        "labels": {"en": "Employer", "ru": "Работодатель"},
        "source": "fixed",
        "name": "Director (demo)",
        "email": DEMO_EMPLOYER,
    },
]

DEMO_ROWS = [
    {
        "email": "anna.petrova@example.com",
        "name": "Anna Petrova",
        "position": "Accountant",
        "start_date": "2027-01-10",
        "salary": "4,200 EUR",
        "contract_number": "EA-1001",
        "city": "Riga",
    },
    {
        "email": "john.smith@example.com",
        "name": "John Smith",
        "position": "Engineer",
        "start_date": "2027-01-15",
        "salary": "5,100 EUR",
        "contract_number": "EA-1002",
        "city": "London",
    },
    {
        "email": "ivan.sidorov@example.com",
        "name": "Иван Сидоров",
        "position": "Логист",
        "start_date": "2027-02-01",
        "salary": "3,900 EUR",
        "contract_number": "EA-1003",
        "city": "Москва",
    },
]


@dataclass(frozen=True)
class DemoResult:
    email: str
    password: str
    created_user: bool
    template_id: int
    csv_path: Path


def create_demo(session: Session, *, email: str, password: str, now: datetime, folder: str | Path) -> DemoResult:
    """Create what is missing of the demo; running it twice changes nothing."""
    user = session.scalar(select(User).where(User.email == normalise_email(email)))
    created_user = user is None
    if user is None:
        user = create_user(session, email=email, password=password, role="admin", now=now)
    html = DEMO_HTML.read_text(encoding="utf-8")
    template = session.scalar(select(DocumentTemplate).where(DocumentTemplate.name == DEMO_TEMPLATE_NAME))
    if template is None:
        template = create_template(session, name=DEMO_TEMPLATE_NAME, html=html, user=user, now=now).template
    if session.scalar(select(DocumentTemplate).where(DocumentTemplate.name == DEMO_TWO_PARTY_NAME)) is None:
        countersigned = html.replace(
            "<p>The Employee:<br>{{ signature }}</p>",
            "<p>The Employee:<br>{{ signature }}</p>\n<p>For the Employer:<br>{{ signature_employer }}</p>",
        )
        two_party = create_template(session, name=DEMO_TWO_PARTY_NAME, html=countersigned, user=user, now=now)
        save_parties(
            session,
            template=two_party.template,
            parties=DEMO_PARTIES,
            routing=[["recipient"], ["employer"]],
            user=user,
            now=now,
        )
    csv_path = Path(folder) / "demo" / "recipients.csv"
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8-sig") as fh:
        writer = csv_writer(fh)
        writer.writerow(DEMO_ROWS[0])
        writer.writerows(row.values() for row in DEMO_ROWS)
    return DemoResult(
        email=user.email, password=password, created_user=created_user, template_id=template.id, csv_path=csv_path
    )


@click.command("demo")
@click.option("--email", default="admin@example.com", show_default=True)
@click.option("--password", default="bulksign-demo", show_default=True)
def demo_command(email: str, password: str) -> None:
    """Create a demo admin, a demo template and a demo recipients file (idempotent)."""
    result = create_demo(db.session, email=email, password=password, now=utcnow(), folder=current_app.config["VAR_DIR"])
    db.session.commit()
    click.echo(
        f"Demo login: {result.email} / {result.password}"
        + (" (existing account kept)" if not result.created_user else "")
    )
    click.echo(f"Demo recipients file: {result.csv_path}")
