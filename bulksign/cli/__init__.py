"""Flask CLI: ``flask users …``, ``flask jobs …``, ``flask batches …``, ``flask mail …``, ``flask demo``."""
from __future__ import annotations

import logging
import sys

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from bulksign.people.access import ROLES
from bulksign.core.extensions import db, get_redis
from bulksign.models import utcnow
from bulksign.work.queues import QUEUE_NAMES, get_queue

users_cli = AppGroup("users", help="Staff accounts and API keys.")
jobs_cli = AppGroup("jobs", help="RQ workers, the scheduler and periodic jobs.")
batches_cli = AppGroup("batches", help="Batch maintenance.")
teams_cli = AppGroup("teams", help="Teams (departments) and who is in them.")
mail_cli = AppGroup("mail", help="Outgoing mail set-up.")


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(1)


@users_cli.command("create")
@click.argument("email")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
@click.option("--role", type=click.Choice(ROLES), default="staff",
              show_default=True)
@click.option("--team", "team_names", multiple=True, help="A team to join (repeat for several); it must exist.")
def create_user_command(email: str, password: str, role: str, team_names: tuple[str, ...]) -> None:
    """Create a user, in the given teams."""
    from bulksign.people.teams import TeamError, add_member, team_by_name
    from bulksign.people.users import UserError, create_user

    now = utcnow()
    try:
        teams = [team_by_name(db.session, name=name) for name in team_names]
        user = create_user(db.session, email=email, password=password, role=role, now=now)
        for team in teams:
            add_member(db.session, team=team, user=user, by=None, now=now)
    except (UserError, TeamError) as exc:
        _fail(str(exc))
    db.session.commit()
    click.echo(f"Created {user.role} {user.email}" + (f" in {', '.join(t.name for t in teams)}." if teams else "."))


@users_cli.command("create-api-key")
@click.argument("email")
@click.option("--name", default="", help="A label to tell keys apart.")
def create_api_key_command(email: str, name: str) -> None:
    """Create an API key for a user and print it once."""
    from bulksign.people.users import create_api_key

    user = _user_by_email(email)
    created = create_api_key(db.session, user=user, name=name, now=utcnow())
    db.session.commit()
    click.echo(created.secret)
    click.echo("Store this key now: it is not shown again.", err=True)


def _user_by_email(email: str):
    from sqlalchemy import select

    from bulksign.models import User
    from bulksign.people.users import normalise_email

    user = db.session.scalar(select(User).where(User.email == normalise_email(email)))
    if user is None:
        _fail(f"No user with the email {email}.")
    return user


@teams_cli.command("create")
@click.argument("name")
def create_team_command(name: str) -> None:
    """Create a team."""
    from bulksign.people.teams import TeamError, create_team

    try:
        team = create_team(db.session, name=name, now=utcnow())
    except TeamError as exc:
        _fail(str(exc))
    db.session.commit()
    click.echo(f"Created team {team.name}.")


def _change_membership(name: str, email: str, *, add: bool) -> None:
    from bulksign.people.teams import TeamError, add_member, remove_member, team_by_name

    try:
        team = team_by_name(db.session, name=name)
    except TeamError as exc:
        _fail(str(exc))
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


@jobs_cli.command("worker")
@click.argument("queues", nargs=-1)
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
@click.option("--processes", default=1, show_default=True,
              help="Worker processes to fork on this host; 0: PDF_CONCURRENCY (one per core by default).")
def worker_command(queues: tuple[str, ...], burst: bool, processes: int) -> None:
    """Run RQ workers inside the app context (all queues by default)."""
    names = queues or QUEUE_NAMES
    unknown = set(names) - set(QUEUE_NAMES)
    if unknown:
        _fail(f"unknown queue(s) {', '.join(sorted(unknown))}; known: {', '.join(QUEUE_NAMES)}")
    _require_services()
    count = processes or current_app.config["PDF_CONCURRENCY"]
    if count <= 1 and burst:
        _run_worker(names, burst=burst)
    else:
        # Even one long-running worker gets a parent: it recycles itself, and not every supervisor
        # restarts a process that ended cleanly (honcho under `make run` stops everything instead).
        _run_worker_processes(names, burst=burst, count=count)


def _run_worker(names, *, burst: bool) -> None:
    from bulksign.jobs.worker import AppWorker

    config = current_app.config
    worker = AppWorker([get_queue(n) for n in names], connection=get_redis(), max_rss_mb=config["WORKER_MAX_RSS_MB"])
    # with_scheduler: RQ's retry backoff parks jobs in its scheduled registry; some worker must move them back.
    # max_jobs / max_rss_mb: the worker ends cleanly and its supervisor (or the parent below) starts a fresh one.
    worker.work(burst=burst, logging_level="INFO", with_scheduler=True, max_jobs=config["WORKER_MAX_JOBS"] or None)


def _run_worker_processes(names, *, burst: bool, count: int) -> None:
    """Fork ``count`` workers (no connection is shared across the fork) and pass SIGTERM/SIGINT on to them.

    A worker that ends (recycled after WORKER_MAX_JOBS or WORKER_MAX_RSS_MB, or crashed) is replaced
    until this process is asked to stop.
    """
    import os
    import signal
    import time

    from bulksign.core.error_tracking import capture, flush

    db.engine.dispose()
    current_app.extensions.pop("bulksign_redis", None)
    children: set[int] = set()
    stopping = False

    def spawn() -> None:
        pid = os.fork()
        if pid == 0:
            # Until RQ installs its own handlers, a signal must not run the parent's handler (which signals siblings).
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            code = 0
            try:
                _run_worker(names, burst=burst)
            except BaseException as exc:  # a child must never return into the parent's loop
                logging.getLogger(__name__).exception("worker process crashed")
                capture(exc)
                code = 1
            finally:
                flush()  # os._exit skips the SDK's own flush at exit
                os._exit(code)
        children.add(pid)

    def stop(signum, _frame) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            os.kill(pid, signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in range(count):
        spawn()
    while children:
        pid, status = os.wait()
        children.discard(pid)
        if stopping or burst:
            continue
        if status != 0:
            # The pause keeps a crash loop from spinning.
            time.sleep(1)
        if not stopping:
            spawn()


@jobs_cli.command("scheduler")
@click.option("--interval", default=5, show_default=True, help="Seconds between scheduler polls.")
def scheduler_command(interval: int) -> None:
    """Run rq-scheduler with the periodic jobs registered (idempotently, on every poll)."""
    import time

    from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError

    from bulksign.core.error_tracking import capture, flush
    from bulksign.jobs.schedule import periodic_scheduler_class

    _require_services()
    scheduler_class = periodic_scheduler_class()
    delay = 1
    while True:
        try:
            scheduler_class(connection=get_redis(), interval=interval).run()
            return
        except (RedisConnectionError, RedisTimeoutError) as exc:
            # A Redis restart must not end the scheduler: wait, reconnect, re-register.
            logging.getLogger(__name__).warning("redis unavailable (%s); retrying in %s s", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 30)
        except Exception as exc:
            capture(exc)
            flush()
            raise


@jobs_cli.command("tick")
def tick_command() -> None:
    """Run every periodic job once, now, in this process."""
    from bulksign.jobs.periodic import run_periodic
    from bulksign.jobs.schedule import PERIODIC_JOBS

    for job in PERIODIC_JOBS:
        result = run_periodic(job.handle.path)
        click.echo(f"{job.name}: {result}")


@batches_cli.command("rebuild-counts")
@click.argument("batch_ids", nargs=-1, type=int)
def rebuild_counts_command(batch_ids: tuple[int, ...]) -> None:
    """Set the per-batch status counters from the requests (every batch by default); safe while workers run."""
    from sqlalchemy import select

    from bulksign.batches.counts import counters, rebuild
    from bulksign.models import Batch

    query = select(Batch.id).order_by(Batch.id)
    ids = list(db.session.scalars(query.where(Batch.id.in_(batch_ids)) if batch_ids else query))
    unknown = sorted(set(batch_ids) - set(ids))
    if unknown:
        _fail(f"No batch with the id {', '.join(map(str, unknown))}.")
    differed = 0
    for start in range(0, len(ids), 100):  # short transactions: the counters of a batch are locked while rebuilt
        chunk = ids[start:start + 100]
        before = counters(db.session, chunk)
        rebuild(db.session, batch_ids=chunk)
        after = counters(db.session, chunk)
        # Approximate while workers run: a move committed between the two reads also counts as a difference.
        differed += sum(before[b] != after[b] for b in chunk)
        db.session.commit()
    click.echo(f"Rebuilt the counters of {len(ids)} batches; {differed} differed from their requests.")


def _require_services() -> None:
    """One clear line naming the variable when the database or Redis cannot be reached."""
    from bulksign.ops.services import check_services

    report = check_services(db_engine=db.engine, redis=get_redis())
    if not report.ok:
        _fail("; ".join(report.problems()))


@click.command("demo")
@click.option("--email", default="admin@example.com", show_default=True)
@click.option("--password", default="bulksign-demo", show_default=True)
def demo_command(email: str, password: str) -> None:
    """Create a demo admin, a demo template and a demo recipients file (idempotent)."""
    from bulksign.cli.demo import create_demo

    result = create_demo(db.session, email=email, password=password, now=utcnow(),
                         folder=current_app.config["VAR_DIR"])
    db.session.commit()
    click.echo(f"Demo login: {result.email} / {result.password}" + (" (existing account kept)" if not result.created_user else ""))
    click.echo(f"Demo recipients file: {result.csv_path}")


@mail_cli.command("dkim-keygen")
@click.option("--domain", required=True, help="The signing domain (the From address's domain).")
@click.option("--selector", required=True, help="The record's selector, e.g. the year: mail2026.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Where to write the private key (DKIM_PRIVATE_KEY_PATH); refused if it exists.")
@click.option("--bits", default=2048, show_default=True, type=click.IntRange(1024, 4096))
def dkim_keygen_command(domain: str, selector: str, out_path: str, bits: int) -> None:
    """Make a DKIM key, store its private half and print the DNS TXT record to publish."""
    import os

    from bulksign.mail.dkim_signing import generate_key

    generated = generate_key(domain=domain, selector=selector, bits=bits)
    try:
        # O_EXCL: a key already in use is never overwritten; 0600: only this account reads it.
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _fail(f"{out_path} exists already; choose another path (a new selector gets a new key).")
    except OSError as exc:
        _fail(f"{out_path} cannot be written ({exc.strerror}).")
    with os.fdopen(fd, "wb") as handle:
        handle.write(generated.private_pem)
    click.echo(generated.zone_line())
    click.echo(f"Private key written to {out_path}. Publish the record above, then set DKIM_DOMAIN={domain.lower()} "
               f"DKIM_SELECTOR={selector} DKIM_PRIVATE_KEY_PATH={out_path}.", err=True)


def init_app(app: Flask) -> None:
    app.cli.add_command(users_cli)
    app.cli.add_command(jobs_cli)
    app.cli.add_command(batches_cli)
    app.cli.add_command(teams_cli)
    app.cli.add_command(mail_cli)
    app.cli.add_command(demo_command)
    logging.getLogger("rq").setLevel(logging.INFO)
