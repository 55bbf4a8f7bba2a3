"""What the CLI's commands share: a clear one-line failure, and the services checked before a long-running one."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from bulksign.core.extensions import db, get_redis
from bulksign.ops.services import check_services


def fail(message: str) -> NoReturn:
    click.echo(f"Error: {message}", err=True)
    sys.exit(1)


def require_services() -> None:
    """One clear line naming the variable when the database or Redis cannot be reached."""
    report = check_services(db_engine=db.engine, redis=get_redis())
    if not report.ok:
        fail("; ".join(report.problems()))
