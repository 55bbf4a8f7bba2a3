"""A private PgBouncer in transaction pooling, in front of the test PostgreSQL, as production runs it.

Each pytest run (and each bench or soak) starts its own on a free loopback port, so what goes
through it is exactly what that run sent. PgBouncer refuses to run as root: as root it is
started as the ``postgres`` user (Debian's server package makes that user).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tests.support.services import free_port

CONFIG = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = transaction
stats_users = {user}
default_pool_size = 30
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits,options
logfile = {folder}/pgbouncer.log
pidfile = {folder}/pgbouncer.pid
"""


class PgBouncer:
    """``pgbouncer`` on a free port, ``pool_mode = transaction``, every database of the server behind it."""

    def __init__(self, server_url: str):
        target = urlsplit(server_url)
        self.server_url = server_url
        self.server_host, self.server_port = target.hostname or "127.0.0.1", target.port or 5432
        self.user = target.username or "postgres"
        self.port = free_port()
        self.folder = tempfile.mkdtemp(prefix="bulksign-pgbouncer-")
        self.process: subprocess.Popen | None = None

    def url_for(self, database_url: str) -> str:
        """``database_url`` (a database on the server behind this PgBouncer), reached through PgBouncer."""
        parts = urlsplit(database_url)
        netloc = f"{parts.username or self.user}@127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def start(self) -> None:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not os.path.exists(binary):
            raise RuntimeError("pgbouncer is not installed (scripts/install-system-deps.sh --test)")
        with open(os.path.join(self.folder, "pgbouncer.ini"), "w") as ini:
            ini.write(
                CONFIG.format(
                    host=self.server_host, port=self.server_port, listen=self.port, folder=self.folder, user=self.user
                )
            )
        with open(os.path.join(self.folder, "users.txt"), "w") as users:
            users.write(f'"{self.user}" ""\n')
        as_user = {}
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            for name in os.listdir(self.folder) + [""]:
                os.chown(os.path.join(self.folder, name), owner.pw_uid, owner.pw_gid)
            as_user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        self.process = subprocess.Popen(
            [binary, os.path.join(self.folder, "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **as_user,
        )
        probe = self.url_for(self.server_url)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited at start: {self.log_tail()}")
            try:
                with psycopg.connect(probe, connect_timeout=2, prepare_threshold=None) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"pgbouncer did not answer on port {self.port}: {self.log_tail()}")

    def queries(self) -> int:
        """How many queries PgBouncer passed on since it started, every database together (``SHOW STATS``)."""
        admin = self.url_for(self.server_url.rsplit("/", 1)[0] + "/pgbouncer")
        with psycopg.connect(
            admin, autocommit=True, prepare_threshold=None, cursor_factory=psycopg.ClientCursor
        ) as conn:
            cursor = conn.execute("SHOW STATS")
            names = [c.name for c in cursor.description or ()]
            return sum(int(row[names.index("total_query_count")]) for row in cursor.fetchall())

    def log_tail(self, chars: int = 2000) -> str:
        try:
            with open(os.path.join(self.folder, "pgbouncer.log")) as log:
                return log.read()[-chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)
