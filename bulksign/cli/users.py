"""``flask users …`` (staff accounts, API keys) and ``flask teams …`` (teams and who is in them)."""

from __future__ import annotations

import click
from flask.cli import AppGroup
from sqlalchemy import select

from bulksign.cli.common import fail
from bulksign.core.extensions import db
from bulksign.models import User, utcnow
from bulksign.people.access import ROLES
from bulksign.people.teams import (
    TeamError,
    add_member,
    create_team,
    remove_member,
    set_require_approval,
    team_by_name,
)
from bulksign.people.users import UserError, create_api_key, create_user, normalise_email, set_display_name

users_cli = AppGroup("users", help="Staff accounts and API keys.")
teams_cli = AppGroup("teams", help="Teams (departments) and who is in them.")


@users_cli.command("create")
@click.argument("email")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
@click.option("--role", type=click.Choice(ROLES), default="staff", show_default=True)
@click.option("--team", "team_names", multiple=True, help="A team to join (repeat for several); it must exist.")
@click.option("--name", default=None, help='Display name, as recipients read it: "Anna Schmidt asks you to sign".')
def create_user_command(email: str, password: str, role: str, team_names: tuple[str, ...], name: str | None) -> None:
    """Create a user, in the given teams."""
    now = utcnow()
    try:
        teams = [team_by_name(db.session, name=team) for team in team_names]
        user = create_user(db.session, email=email, password=password, role=role, now=now, name=name)
        for team in teams:
            add_member(db.session, team=team, user=user, by=None, now=now)
    except (UserError, TeamError) as exc:
        fail(str(exc))
    db.session.commit()
    click.echo(f"Created {user.role} {user.email}" + (f" in {', '.join(t.name for t in teams)}." if teams else "."))


@users_cli.command("update")
@click.argument("email")
@click.option("--name", required=True, help='Display name, as recipients read it; "" takes it away (the email shows).')
def update_user_command(email: str, name: str) -> None:
    """Change a user's display name."""
    user = _user_by_email(email)
    try:
        set_display_name(db.session, user=user, name=name)
    except UserError as exc:
        fail(str(exc))
    db.session.commit()
    click.echo(f"{user.email} is called {user.display_name}." if user.display_name else f"{user.email} has no name.")


@users_cli.command("create-api-key")
@click.argument("email")
@click.option("--name", default="", help="A label to tell keys apart.")
def create_api_key_command(email: str, name: str) -> None:
    """Create an API key for a user and print it once."""
    user = _user_by_email(email)
    created = create_api_key(db.session, user=user, name=name, now=utcnow())
    db.session.commit()
    click.echo(created.secret)
    click.echo("Store this key now: it is not shown again.", err=True)


def _user_by_email(email: str):
    user = db.session.scalar(select(User).where(User.email == normalise_email(email)))
    if user is None:
        fail(f"No user with the email {email}.")
    return user


@teams_cli.command("create")
@click.argument("name")
@click.option(
    "--require-approval", is_flag=True, help="Its staff's new batches wait for a manager's or an admin's approval."
)
def create_team_command(name: str, require_approval: bool) -> None:
    """Create a team."""
    try:
        team = create_team(db.session, name=name, now=utcnow(), require_approval=require_approval)
    except TeamError as exc:
        fail(str(exc))
    db.session.commit()
    click.echo(f"Created team {team.name}{' (batches wait for approval)' if require_approval else ''}.")


@teams_cli.command("update")
@click.argument("name")
@click.option(
    "--require-approval/--no-require-approval",
    default=None,
    help="Whether its staff's new batches wait for a manager's or an admin's approval before anything is sent.",
)
def update_team_command(name: str, require_approval: bool | None) -> None:
    """Change a team's settings."""
    if require_approval is None:
        fail("Say what to change: --require-approval or --no-require-approval.")
    try:
        team = team_by_name(db.session, name=name)
    except TeamError as exc:
        fail(str(exc))
    changed = set_require_approval(db.session, team=team, required=require_approval)
    db.session.commit()
    state = "wait for approval" if require_approval else "go out without approval"
    click.echo(f"New batches of {team.name} {'now ' if changed else ''}{state}{'' if changed else ' already'}.")


def _change_membership(name: str, email: str, *, add: bool) -> None:
    try:
        team = team_by_name(db.session, name=name)
    except TeamError as exc:
        fail(str(exc))
    change = add_member if add else remove_member
    changed = change(db.session, team=team, user=_user_by_email(email), by=None, now=utcnow())
    db.session.commit()
    if add:
        click.echo(f"{email} is {'now' if changed else 'already'} in {team.name}.")
    else:
        click.echo(f"{email} {'left' if changed else 'was not in'} {team.name}.")


@teams_cli.command("add")
@click.argument("name")
@click.argument("email")
def add_member_command(name: str, email: str) -> None:
    """Put a user in a team (recorded as done from the command line)."""
    _change_membership(name, email, add=True)


@teams_cli.command("remove")
@click.argument("name")
@click.argument("email")
def remove_member_command(name: str, email: str) -> None:
    """Take a user out of a team (recorded as done from the command line)."""
    _change_membership(name, email, add=False)
