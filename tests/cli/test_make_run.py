"""``make run`` follows the configuration: the Redis it makes sure of is the one ``REDIS_URL`` names (a local one
started only there, another only checked), and the SMTP catcher listens where the app sends (``MAIL_PORT``) and
writes where the app's mailbox page reads. Run as ``make run`` runs them: the script, and honcho on Procfile.dev."""

from __future__ import annotations

import os
import signal
import smtplib
import subprocess
import time
from email.message import EmailMessage
from pathlib import Path

from bulksign.core.config import BASE_DIR
from tests.support.services import free_port

ENSURE_REDIS = BASE_DIR / "scripts" / "ensure-redis.sh"


def _ensure_redis(url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "REDIS_URL": url}
    return subprocess.run([str(ENSURE_REDIS)], env=env, capture_output=True, text=True, timeout=60, cwd=BASE_DIR)


def _answers(port: int) -> bool:
    ping = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True, timeout=10)
    return ping.stdout.strip() == "PONG"


def test_the_redis_started_is_the_one_redis_url_names_and_a_remote_one_is_only_checked():
    port = free_port()
    assert not _answers(port)
    started = _ensure_redis(f"redis://127.0.0.1:{port}/2")
    try:
        assert started.returncode == 0, started.stderr
        assert f"Starting Redis on 127.0.0.1:{port}" in started.stdout
        assert _answers(port)
        again = _ensure_redis(f"redis://localhost:{port}/2")  # answers already: left as it is
        assert again.returncode == 0 and "Starting" not in again.stdout, again.stdout + again.stderr
    finally:
        subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True, timeout=10)

    # Another host's Redis is never stood in for by a local one: when it does not answer, the command says so.
    began = time.monotonic()
    remote = _ensure_redis("redis://192.0.2.1:6390/0")
    assert remote.returncode == 1, remote.stdout + remote.stderr
    assert "REDIS_URL" in remote.stderr and "192.0.2.1:6390" in remote.stderr
    assert "Starting" not in remote.stdout and time.monotonic() - began < 20


def _wait_for_port(port: int, *, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with smtplib.SMTP("127.0.0.1", port, timeout=2) as smtp:
                smtp.noop()
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


def test_the_smtp_catcher_of_procfile_dev_listens_on_mail_port_and_writes_to_the_app_s_mailbox(tmp_path: Path):
    port = free_port()
    env = {**os.environ, "MAIL_PORT": str(port), "BULKSIGN_VAR_DIR": str(tmp_path)}
    env.pop("MAIL_SERVER", None)
    honcho = subprocess.Popen(
        [str(BASE_DIR / ".venv" / "bin" / "honcho"), "start", "-f", "Procfile.dev", "smtp"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for_port(port)
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "app@example.com", "eva@example.com", "Caught"
        message.set_content("Hello")
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
            smtp.send_message(message)
        (caught,) = (tmp_path / "mailbox").glob("*.eml")
        assert b"Subject: Caught" in caught.read_bytes()
    finally:
        os.killpg(honcho.pid, signal.SIGTERM)
        output, _ = honcho.communicate(timeout=30)
    assert f"SMTP catcher on 127.0.0.1:{port}" in output, output
