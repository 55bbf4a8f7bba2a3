"""Real services for the test session: a fresh PostgreSQL database and a private Redis server.

Each pytest process (and each xdist worker) gets its own database and its own Redis on a free
port, so parallel runs and developers' sessions never see each other's data.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager

import psycopg
from redis import Redis

#: Where to create test databases: a superuser connection (trust auth on loopback here).
PG_ADMIN_URL = os.environ.get("TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def postgres_database():
    """Yield the SQLAlchemy URL of a new, empty database; drop it afterwards."""
    name = f"bulksign_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class RedisServer:
    """A private ``redis-server`` process on a free loopback port, keeping nothing on disk."""

    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="bulksign-redis-")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.process = subprocess.Popen(
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = Redis(port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart_empty(self) -> None:
        """Kill and start again on the same port: everything in Redis is lost, as in a crash."""
        if self.process:
            self.process.kill()
            self.process.wait(timeout=10)
        self.start()
