"""Word → PDF through LibreOffice kept warm: one unoserver (and its soffice) per process that converts.
More in docs/architecture/documents.md."""

from __future__ import annotations

import atexit
import functools
import http.client
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import xmlrpc.client
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import unoserver

from bulksign.core import settings
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.parent_death import end_with_parent
from bulksign.documents import sandbox
from bulksign.documents.pdf import RenderError

logger = logging.getLogger(__name__)

#: A Python that has LibreOffice's ``uno`` (Debian: python3-uno for /usr/bin/python3).
UNO_PYTHON = settings.value("UNO_PYTHON")
SOFFICE = settings.value("SOFFICE_PATH")
#: Conversions one LibreOffice serves before it is replaced.
MAX_DOCUMENTS = settings.value("LIBREOFFICE_MAX_DOCUMENTS")
#: How long a cold start may take (first start in a fresh profile: 3–10 s here).
START_SECONDS = 60.0

#: Our environment's packages go last on the system Python's path: only unoserver is wanted from there.
#: The watch thread ends the whole group (unoserver, oosplash, soffice) once the process that started it is gone:
#: the death signal alone is not enough, since unoserver, while LibreOffice starts (its first ~7 s), passes the
#: SIGTERM on and serves on, and a soffice that ignored it stays too (seen: orphans left by a killed worker).
#: In the sandbox its parent is the sandbox's, which ends with ours (``--die-with-parent``).
#: unoserver (3.7) opens each document in a frame, as for a person to see; ``Hidden`` (JODConverter's default)
#: opens it without one: 118 → 84 ms of LibreOffice CPU per two-page contract, the same PDF. unoserver takes no
#: load options, so its converter's desktop is wrapped to add it.
#: unoserver serves XML-RPC on TCP; here it serves on a Unix socket in the converter's folder instead (its
#: ``--interface``), the one way in from outside the sandbox's network namespace.
_BOOT = """\
import os, signal, socket, sys, threading, time, xmlrpc.server
sys.path.append(sys.argv.pop(1))
parent = os.getppid()

def watch():
    while os.getppid() == parent:
        time.sleep(1)
    os.killpg(0, signal.SIGKILL)

threading.Thread(target=watch, daemon=True).start()
sys.argv[0] = "unoserver"
from unoserver import converter, server  # imports uno, which makes com.sun.star importable
from com.sun.star.beans import PropertyValue

class HiddenDesktop:
    def __init__(self, desktop):
        self.desktop = desktop

    def loadComponentFromURL(self, url, target, flags, properties):
        hidden = PropertyValue(Name="Hidden", Value=True)
        return self.desktop.loadComponentFromURL(url, target, flags, (*properties, hidden))

    def __getattr__(self, name):
        return getattr(self.desktop, name)

connect = converter.UnoConverter.__init__

def connect_hidden(self, *args, **kwargs):
    connect(self, *args, **kwargs)
    self.desktop = HiddenDesktop(self.desktop)

converter.UnoConverter.__init__ = connect_hidden

class UnixSocketHandler(xmlrpc.server.SimpleXMLRPCRequestHandler):
    disable_nagle_algorithm = False  # a TCP option

class UnixSocketServer(xmlrpc.server.SimpleXMLRPCServer):
    address_family = socket.AF_UNIX

    def __init__(self, addr, allow_none=False):
        super().__init__(addr[0], UnixSocketHandler, logRequests=False, allow_none=allow_none)

server.XMLRPCServer = UnixSocketServer
server.main()
"""

#: The converter's XML-RPC socket, in its folder.
_SOCKET = "xmlrpc.sock"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class _Transport(xmlrpc.client.Transport):
    """XML-RPC over the converter's Unix socket with a timeout, so a hung LibreOffice cannot hang the caller."""

    def __init__(self, path: str, timeout: float):
        super().__init__()
        self.path = path
        self.timeout = timeout

    def make_connection(self, host):
        return _UnixConnection(self.path, self.timeout)


def _timed_out(timeout: float, *, converting: float) -> RenderError:
    """A conversion past its time: tried once more, on a fresh LibreOffice, only when it may be the document's own
    fault (why: docs/architecture/documents.md)."""
    if converting < timeout / 2:
        return RenderError(f"The document took longer than {timeout:g} s to convert to PDF.", transient=True)
    return RenderError(
        N_(
            "The document took longer than %(n)s s to convert to PDF: it is too long or too complex to lay out. "
            "Shorten the template or the values it prints.",
            n=f"{timeout:g}",
        ),
        transient=True,
        attempts=2,
    )


def _proxy(folder: str, timeout: float) -> xmlrpc.client.ServerProxy:
    return xmlrpc.client.ServerProxy(
        "http://localhost", allow_none=True, transport=_Transport(os.path.join(folder, _SOCKET), timeout)
    )


class Converter:
    """One warm LibreOffice behind unoserver, owned by the process that made it; not shared across forks."""

    def __init__(self, *, max_documents: int = MAX_DOCUMENTS):
        self.max_documents = max_documents
        self.served = 0
        self.starts = 0
        self._process: subprocess.Popen | None = None
        self._folder: str | None = None
        self._ready = False
        self._started_at = 0.0
        self._lock = threading.Lock()

    def convert(
        self,
        data: bytes,
        *,
        timeout: float,
        max_pages: int | None = None,
        options: tuple[str, ...] = (),
        documents: int = 1,
    ) -> bytes:
        """The PDF of one Word document within ``timeout`` seconds, start included, exported to at most ``max_pages`` +
        1 pages; RenderError (transient) when LibreOffice fails, hangs or is still starting."""
        deadline = time.monotonic() + timeout
        with self._lock:  # one LibreOffice converts one document at a time
            if self._process is None or self._process.poll() is not None or self.served >= self.max_documents:
                self._start()
            if not self._ready:
                self._wait_until_ready(deadline)
            self.served += documents
            converting_since = time.monotonic()
            left = max(deadline - converting_since, 0.01)
            assert self._folder is not None  # ``_start`` made it
            proxy = _proxy(self._folder, left)
            try:
                export = [*options, *([] if max_pages is None else [f"PageRange=1-{max_pages + 1}"])]
                result = proxy.convert(None, xmlrpc.client.Binary(data), None, "pdf", None, export, False)
            except TimeoutError:
                self.stop()  # a hung LibreOffice serves nobody: the next document starts a fresh one
                raise _timed_out(timeout, converting=time.monotonic() - converting_since) from None
            except (OSError, http.client.HTTPException, xmlrpc.client.Error) as exc:
                alive = self._process is not None and self._process.poll() is None
                if not alive:
                    self.stop()
                raise RenderError(
                    "LibreOffice could not convert the document to PDF.", transient=not alive, detail=str(exc)[-2000:]
                ) from None
        pdf = result.data if isinstance(result, xmlrpc.client.Binary) else b""
        if not pdf.startswith(b"%PDF"):
            raise RenderError("LibreOffice produced no PDF for the document.", transient=True)
        return pdf

    def _start(self) -> None:
        self.stop()
        # One folder per LibreOffice: its profile, its socket and the documents it converts, the only files it sees.
        self._folder = tempfile.mkdtemp(prefix="bulksign-libreoffice-")
        packages = _unoserver_path()
        args = [
            UNO_PYTHON,
            "-c",
            _BOOT,
            packages,
            "--interface",
            os.path.join(self._folder, _SOCKET),
            "--uno-interface",
            "127.0.0.1",
            "--uno-port",
            str(_free_port()),
            "--executable",
            _soffice(),
            "--user-installation",
            os.path.join(self._folder, "profile"),
        ]
        try:
            args = sandbox.command(args, folder=self._folder, readable=[packages])
        except sandbox.SandboxError as exc:
            raise RenderError("LibreOffice is not available on this server.", transient=True, detail=str(exc)) from None
        try:
            # A session of its own: stopping it kills soffice too, by this group's id.
            # Started from this process's long-lived spawner thread: the death signal follows the thread that
            # forked, and the render job converts in a short-lived helper thread whose end would kill it.
            # On this process's death unoserver gets SIGTERM and passes it on to soffice (the watch thread in
            # ``_BOOT`` ends whatever does not).
            self._process = (
                _spawner()
                .submit(
                    subprocess.Popen,
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=functools.partial(end_with_parent, parent=os.getpid()),
                )
                .result()
            )
        except OSError as exc:
            raise RenderError("LibreOffice is not available on this server.", transient=True, detail=str(exc)) from None
        self.served = 0
        self.starts += 1
        self._ready = False
        self._started_at = time.monotonic()

    def _wait_until_ready(self, deadline: float) -> None:
        """Wait for the starting LibreOffice until ``deadline``; a slow start is left running for the next call
        (a preview must answer before the web worker's timeout), a failed one is ended."""
        assert self._process is not None and self._folder is not None  # ``_start`` ran
        proxy = _proxy(self._folder, 5)
        while self._process.poll() is None and time.monotonic() - self._started_at < START_SECONDS:
            try:
                proxy.info()
            except (OSError, http.client.HTTPException, xmlrpc.client.Error):
                if time.monotonic() > deadline:
                    raise RenderError(
                        "LibreOffice is still starting on this server; try again in a moment.", transient=True
                    ) from None
                time.sleep(0.1)
                continue
            self._ready = True
            log(
                logger,
                logging.INFO,
                "libreoffice started",
                pid=self._process.pid,
                seconds=round(time.monotonic() - self._started_at, 2),
            )
            return
        self.stop()
        raise RenderError("LibreOffice did not start on this server.", transient=True)

    def stop(self) -> None:
        """End this converter's LibreOffice (if any) and remove its profile."""
        if self._process is not None:
            if self._process.poll() is None:
                try:
                    os.killpg(self._process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._process.wait()
            self._process = None
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    @property
    def warm(self) -> bool:
        """A started LibreOffice answers: the next conversion pays no start-up (read only, for pages that say so)."""
        return self._ready and self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The unoserver's process id while it runs (tests kill it to see the converter recover)."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None


_spawners: dict[int, ThreadPoolExecutor] = {}


def _spawner() -> ThreadPoolExecutor:
    """One thread per process that lives as long as the process and starts every LibreOffice (see ``_start``)."""
    pid = os.getpid()
    with _converters_lock:
        if pid not in _spawners:
            _spawners[pid] = ThreadPoolExecutor(1, thread_name_prefix="libreoffice-spawner")
        return _spawners[pid]


def _unoserver_path() -> str:
    return str(Path(unoserver.__file__).parent.parent)


def _soffice() -> str:
    found = shutil.which(SOFFICE)
    if found is None:
        raise RenderError(
            "LibreOffice is not installed on this server (package libreoffice-writer-nogui).", transient=True
        )
    return found


_converters: dict[int, Converter] = {}
_converters_lock = threading.Lock()


def converter() -> Converter:
    """This process's converter (a forked child gets its own, never its parent's LibreOffice)."""
    pid = os.getpid()
    with _converters_lock:
        if pid not in _converters:
            _converters[pid] = Converter()
            atexit.register(_converters[pid].stop)
        return _converters[pid]
