"""A Redis master, one replica and a ``redis-sentinel`` watching them, on free loopback ports, for failover tests."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from redis import Redis

from tests.support.processes import wait_for
from tests.support.services import RedisServer, free_port

MASTER_NAME = "bulksign"


class SentinelSetup:
    """Start with ``start()``; ``url`` is the app's REDIS_URL; ``fail_over()`` kills the master and waits."""

    def __init__(self):
        self.master = RedisServer()
        self.replica = RedisServer()
        self.sentinel_port = free_port()
        self.dead_sentinel_port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="bulksign-sentinel-"))
        self.sentinel: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        # The first sentinel listed is down: clients must move on to the next one.
        return f"redis+sentinel://127.0.0.1:{self.dead_sentinel_port},127.0.0.1:{self.sentinel_port}/{MASTER_NAME}"

    def client(self) -> Redis:
        """A client of the sentinel itself."""
        return Redis(port=self.sentinel_port, socket_timeout=5, decode_responses=True)

    def start(self) -> None:
        self.master.start()
        self.replica.start()
        replica = Redis(port=self.replica.port, decode_responses=True)
        replica.replicaof("127.0.0.1", self.master.port)
        _wait(lambda: replica.info("replication").get("master_link_status") == "up", 30, "the replica to sync")
        config = self.dir / "sentinel.conf"
        # Sentinel rewrites its file; a quick verdict (1 s) and a short failover keep the test brief.
        config.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {self.sentinel_port}",
                    f"dir {self.dir}",
                    f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master.port} 1",
                    f"sentinel down-after-milliseconds {MASTER_NAME} 1000",
                    f"sentinel failover-timeout {MASTER_NAME} 10000",
                ]
            )
            + "\n"
        )
        binary = shutil.which("redis-sentinel") or "/usr/bin/redis-sentinel"
        self.sentinel = subprocess.Popen([binary, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # A failover needs a replica the sentinel knows (it learns them from the master's INFO).
        _wait(lambda: self._replicas_known(), 30, "the sentinel to see the replica")

    def _replicas_known(self) -> bool:
        return any(int(r["port"]) == self.replica.port for r in self.client().sentinel_slaves(MASTER_NAME))

    def master_port(self) -> int:
        """The master's port, as the sentinel says."""
        # The raw command: redis-py's helper for it fails on a plain client (its reply parser takes no options).
        return int(self.client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)[1])

    def fail_over(self, *, timeout: float = 60) -> None:
        """Kill the master (as a crash would) and wait until the sentinel names the replica master."""
        self.master.process.kill()
        self.master.process.wait(timeout=10)
        _wait(lambda: self.master_port() == self.replica.port, timeout, "the sentinel to promote the replica")
        promoted = Redis(port=self.replica.port, decode_responses=True)
        _wait(lambda: promoted.info("replication").get("role") == "master", timeout, "the replica to be master")

    def stop(self) -> None:
        if self.sentinel and self.sentinel.poll() is None:
            self.sentinel.terminate()
            self.sentinel.wait(timeout=10)
        self.master.stop()
        self.replica.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _wait(check, timeout: float, what: str) -> None:
    """``wait_for`` on a check that may raise while a server is not up yet."""

    def quietly():
        try:
            return check()
        except Exception:
            return False

    wait_for(quietly, timeout=timeout, what=what)
