"""Real app processes (``flask jobs …``, gunicorn) as subprocesses, and bounded waits on them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests

from bulksign.core.config import BASE_DIR


def start(args: list[str], *, env: dict, log: Path) -> subprocess.Popen:
    """``flask <args>`` (or gunicorn when ``args[0]`` is ``gunicorn``) in the project folder, output into ``log``."""
    command = (
        [str(Path(sys.executable).with_name("gunicorn")), *args[1:]]
        if args[0] == "gunicorn"
        else [sys.executable, "-m", "flask", *args]
    )
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, cwd=BASE_DIR, env={**env, "FLASK_APP": "wsgi"}, stdout=out, stderr=subprocess.STDOUT
        )


def _pids() -> list[int]:
    """Every process's id, from ``/proc``."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command's name (state first, then the parent); [] when gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return []


def alive(pid: int) -> bool:
    """The process runs (a zombie waiting for its parent to reap it does not)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _children_by_parent() -> dict[str, list[int]]:
    """Every live process, under its parent's id."""
    below: dict[str, list[int]] = {}
    for pid in _pids():
        fields = _stat(pid)
        if len(fields) > 1 and fields[0] != "Z":
            below.setdefault(fields[1], []).append(pid)
    return below


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    return _children_by_parent().get(str(pid), [])


def wait_for(check: Callable[[], object], *, timeout: float, what: str, every: float = 0.1):
    """Poll ``check`` until it returns something true (returned), for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def first_answer(url: str, *, timeout: float = 60) -> requests.Response:
    """The first answer to a GET of ``url`` from a server still starting (a gunicorn boots for seconds when loaded)."""

    def answer() -> tuple[requests.Response] | None:
        try:
            return (requests.get(url, timeout=30),)  # in a tuple: a 404 response is false
        except requests.ConnectionError:
            return None

    (response,) = wait_for(answer, timeout=timeout, what=f"an answer from {url}", every=0.2)
    return response


def terminate_and_time(process: subprocess.Popen, *, give_up_after: float = 60) -> float:
    """SIGTERM the process and return the seconds until it exited (killed after ``give_up_after``)."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=give_up_after)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    return time.monotonic() - started


def descendants(pid: int) -> list[int]:
    """The live processes below ``pid``: its children, theirs, and so on (one look at ``/proc``, not one a level)."""
    below = _children_by_parent()
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in below.get(str(parent), [])]
        found += frontier
    return found


def stop(process: subprocess.Popen) -> None:
    """Make sure a process started by a test is gone, with every process it started (after a failed assertion):
    a worker killed with its parent stops only after its warm shutdown, and one still draining the session's
    queues took the next test's job (seen in CI: a mail job gone before the test could look at it)."""
    if process.poll() is None:
        below = descendants(process.pid)
        process.kill()
        process.wait(timeout=10)
        for pid in below:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def kill_left_over(marker: str) -> list[str]:
    """SIGKILL every process whose environment holds ``marker`` (``REDIS_URL=`` a session's private Redis): what an earlier
    test left running, orphaned, would otherwise work its queues during the next one. Returns their commands."""
    killed = []
    needle = marker.encode() + b"\0"  # the whole variable: port 6379 must not match 63790
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if needle not in environ.read():
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
            os.kill(pid, signal.SIGKILL)
            killed.append(command)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return killed


def terminate_once(
    process: subprocess.Popen, ready: Callable[[], object], *, what: str, timeout: float = 60, give_up_after: float = 60
) -> float:
    """Wait until ``ready()``, SIGTERM the process and return the seconds until it exited (gone either way)."""
    try:
        wait_for(ready, timeout=timeout, what=what, every=0.3)
        return terminate_and_time(process, give_up_after=give_up_after)
    finally:
        stop(process)
