"""The converters (wkhtmltopdf, LibreOffice) run in a sandbox: no network, and a view of the files that holds the
system's programs, libraries and fonts and the converter's own working folder, nothing of ours.
More in docs/architecture/documents.md."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

from bulksign.core import settings
from bulksign.core.errors import BulksignError

BWRAP = settings.value("BWRAP_PATH")
#: What of the system a converter sees, read-only: programs and libraries, fonts, their configuration and cache
#: (without the cache fontconfig scans every font at each start), LibreOffice's own settings, the user database
#: (LibreOffice asks for its user's name). Not the rest of /etc.
_SYSTEM = (
    "/usr",
    "/etc/fonts",
    "/var/cache/fontconfig",
    "/etc/ld.so.cache",
    "/etc/alternatives",
    "/etc/libreoffice",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
)
#: Top-level folders that merged-/usr systems (Debian 12) keep as links into /usr.
_USR_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class SandboxError(BulksignError):
    """The sandbox cannot be made on this server: the operator's to fix (install bubblewrap, allow namespaces)."""

    status = 500


def enabled() -> bool:
    return settings.value("CONVERTER_SANDBOX") != "off"


def command(args: Sequence[str], *, folder: str, readable: Sequence[str] = ()) -> list[str]:
    """``args`` as a command line that runs them in the sandbox, with ``folder`` writable (their working folder,
    also their home and temporary folder) and ``readable`` paths visible read-only; ``args`` as they are where the
    sandbox is off. SandboxError where it cannot be made."""
    if not enabled():
        return list(args)
    _check()
    return _sandboxed(args, folder=folder, readable=readable)


def _sandboxed(args: Sequence[str], *, folder: str, readable: Sequence[str]) -> list[str]:
    view = []
    for path in _SYSTEM:
        view += ["--ro-bind-try", path, path]
    for path in _USR_LINKS:
        if os.path.islink(path):
            view += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            view += ["--ro-bind", path, path]
    for path in readable:
        view += ["--ro-bind", path, path]
    return [
        _bwrap(),
        "--unshare-all",
        "--die-with-parent",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        folder,
        "--setenv",
        "TMPDIR",
        folder,
        "--setenv",
        "XDG_RUNTIME_DIR",
        folder,
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        *view,
        "--bind",
        folder,
        folder,
        "--chdir",
        folder,
        "--",
        *args,
    ]


def _bwrap() -> str:
    found = shutil.which(BWRAP)
    if found is None:
        raise SandboxError(
            "bubblewrap (bwrap), which keeps the document converters away from the network and the "
            "stored documents, is not installed on this server (Debian package bubblewrap)."
        )
    return found


@functools.cache
def _check() -> None:
    """Once per process: can a sandbox be made here? (A container without the right to make namespaces cannot.)
    Cached only when it can, so a fixed host works without a restart."""
    try:
        with tempfile.TemporaryDirectory(prefix="bulksign-sandbox-") as folder:
            proc = subprocess.run(_sandboxed(["true"], folder=folder, readable=()), capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"The converters' sandbox (bubblewrap) did not start: {exc}") from None
    if proc.returncode != 0:
        raise SandboxError(
            "The converters' sandbox (bubblewrap) cannot start on this server: "
            f"{proc.stderr.decode('utf-8', 'replace').strip()[-500:]}"
        )
