"""The Flask CLI: ``flask users …``, ``flask teams …``, ``flask jobs …``, ``flask batches …``, ``flask mail …``,
``flask privacy …``, ``flask demo``; each group in its own module."""

from __future__ import annotations

import logging

from flask import Flask

from bulksign.cli.batches import batches_cli
from bulksign.cli.demo import demo_command
from bulksign.cli.jobs import jobs_cli
from bulksign.cli.mail import mail_cli
from bulksign.cli.privacy import privacy_cli
from bulksign.cli.users import teams_cli, users_cli


def init_app(app: Flask) -> None:
    app.cli.add_command(users_cli)
    app.cli.add_command(jobs_cli)
    app.cli.add_command(batches_cli)
    app.cli.add_command(teams_cli)
    app.cli.add_command(mail_cli)
    app.cli.add_command(privacy_cli)
    app.cli.add_command(demo_command)
    logging.getLogger("rq").setLevel(logging.INFO)
