"""CPU and memory of the processes a bench starts, read from /proc: each role's process trees, PostgreSQL's backends
of one database, and the sandboxed converters' CPU, which reaches no parent's account unless this process reaps
their orphaned inits (``Orphans``)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _stat_fields(pid: int) -> tuple[str, list[str]] | None:
    """(command, the fields after it, from the state on) of a live process's /proc stat line."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.index("(") + 1 : raw.rindex(")")], raw.rsplit(")", 1)[1].split()


def process_stat(pid: int) -> tuple[str, float, float] | None:
    """(command, own CPU seconds, CPU seconds of its reaped children) of a live process, from /proc."""
    stat = _stat_fields(pid)
    if stat is None:
        return None
    command, fields = stat
    tick = os.sysconf("SC_CLK_TCK")
    return (
        command,
        (int(fields[11]) + int(fields[12])) / tick,
        (int(fields[13]) + int(fields[14])) / tick,
    )


def tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (a worker is a supervising parent with the real worker below it)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in children.read_text().split())
            except OSError:
                pass
    return found


def reaped_cpu() -> float:
    """CPU seconds of this process's reaped children (the bare loop's wkhtmltopdf runs)."""
    times = os.times()
    return times.children_user + times.children_system


#: prctl's option that makes a process the reaper of its orphaned descendants (linux/prctl.h).
_PR_SET_CHILD_SUBREAPER = 36


class Orphans:
    """This process as the subreaper of its descendants, reaping the sandboxes' orphaned inits (``bwrap``) that
    ended, so their CPU (the converter's included) counts in ``os.times()``'s children.

    Reap only where this process is not waiting on a ``bwrap`` of its own (between the bare loop's runs, not
    during them): a reaped child is one ``subprocess`` would no longer find.
    """

    def __enter__(self) -> Orphans:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        return self

    def __exit__(self, *exc) -> None:
        self.reap()
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

    def reap(self) -> None:
        for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
            try:
                pids = [int(c) for c in children.read_text().split()]
            except OSError:
                continue
            for pid in pids:
                stat = _stat_fields(pid)
                if stat is not None and stat[0] == "bwrap" and stat[1][0] == "Z":
                    os.waitpid(pid, 0)


def backend_pids(database: str) -> list[int]:
    """The PostgreSQL backends now serving ``database`` (the server's own background processes are not counted)."""
    import psycopg

    from tests.support.services import PG_ADMIN_URL

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))]


def children_named(name: str) -> list[int]:
    return [pid for pid in tree(os.getpid())[1:] if (process_stat(pid) or ("",))[0] == name]


def cpu_snapshot(roles: dict[str, list[int]]) -> dict[tuple[str, int], tuple[float, float]]:
    """(role, pid) → (own CPU, reaped children's CPU) for every process of each role's trees, wkhtmltopdf left out
    (a render worker's reaped children are the wkhtmltopdf runs: that is what ``reaped`` counts)."""
    snapshot = {}
    for role, roots in roles.items():
        for root in roots:
            for pid in tree(root):
                stat = process_stat(pid)
                if stat is not None and stat[0] != "wkhtmltopdf":
                    snapshot[(role, pid)] = stat[1:]
    return snapshot


def cpu_spent(before: dict, after: dict) -> dict[str, tuple[float, float]]:
    """Role → (own CPU, reaped children's CPU) spent between two snapshots (processes started since count whole)."""
    spent: dict[str, tuple[float, float]] = {}
    for (role, pid), (own, reaped) in after.items():
        own0, reaped0 = before.get((role, pid), (0.0, 0.0))
        total = spent.get(role, (0.0, 0.0))
        spent[role] = (total[0] + own - own0, total[1] + reaped - reaped0)
    return spent
