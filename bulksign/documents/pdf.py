"""HTML → PDF through wkhtmltopdf (pdfkit), with the options measured fastest and safest on this machine."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pdfkit

from bulksign.core import settings
from bulksign.core.errors import BulksignError, Message
from bulksign.core.messages import N_
from bulksign.documents import sandbox

#: javascript off and no delay: 88 ms instead of 310 ms for a 2-page contract (field notes).
#: No local file access: a template or a row cannot read file:///etc/passwd into a PDF.
WKHTMLTOPDF_OPTIONS: dict[str, str] = {
    "encoding": "utf-8",
    "quiet": "",
    "disable-local-file-access": "",
    "disable-javascript": "",
    "javascript-delay": "0",
    "page-size": "A4",
    "margin-top": "20mm",
    "margin-bottom": "20mm",
    "margin-left": "20mm",
    "margin-right": "20mm",
    # No network either: every http(s) load goes to a proxy on port 0, which refuses at once. The template
    # check refuses external URLs, but an HTML parser differential (``<!--><iframe src=…>``) got past it and
    # read internal services (/metrics, /healthz) into the PDF.
    "proxy": "http://127.0.0.1:0",
    "load-error-handling": "abort",
    "load-media-error-handling": "abort",
}

WKHTMLTOPDF = settings.value("WKHTMLTOPDF_PATH")
#: Most pages one recipient's document may have, whatever its template's kind. A converter is stopped as soon as
#: it passes this (wkhtmltopdf: its output is counted as it is written; LibreOffice exports one page more at most),
#: so a document of thousands of pages costs about what one of this many does, not minutes of a render worker.
MAX_PAGES = 100
#: How often a running wkhtmltopdf's output is counted.
_WATCH_SECONDS = 0.05
#: How Qt's PDF writer (wkhtmltopdf) begins each page's object, which it writes out once the page is drawn. Its
#: content streams are compressed, so these bytes occur nowhere else.
_PAGE_OBJECT = b"\n/Type /Page\n"


class RenderError(BulksignError):
    """The document could not be rendered; ``message`` is for people, ``transient`` says whether to retry.

    ``attempts``: a transient failure that may also be the document's own (it outlasted its time) is worth this
    many attempts at most, fewer than ``RENDER_MAX_ATTEMPTS``.
    """

    def __init__(self, message: Message, *, transient: bool = False, detail: str = "", attempts: int | None = None):
        super().__init__(message)
        self.transient = transient
        self.detail = detail
        self.attempts = attempts


_BLOCKED = re.compile(
    r"(ProtocolUnknownError|ContentNotFoundError|HostNotFoundError|ConnectionRefusedError|"
    r"Blocked access|Failed to load|UnknownNetworkError|TimeoutError)",
    re.I,
)


def too_long(limit: int) -> N_:
    """What a person reads of a document that runs past ``limit`` pages (every kind says the same)."""
    return N_(
        "The document runs past %(limit)d pages for this recipient, the most one document may have. Shorten the "
        "template or the values it prints.",
        limit=limit,
    )


class _PageCounter:
    """The pages a running wkhtmltopdf has written to ``path`` so far, read on from where the last look ended."""

    def __init__(self, path: Path):
        self.path = path
        self.pages = 0
        self._read = 0
        self._tail = b""

    def count(self) -> int:
        try:
            with self.path.open("rb") as out:
                out.seek(self._read)
                new = out.read()
        except FileNotFoundError:  # nothing written yet
            return 0
        self._read += len(new)
        seen = self._tail + new
        self.pages += seen.count(_PAGE_OBJECT)
        self._tail = seen[-(len(_PAGE_OBJECT) - 1) :]  # too short to hold a whole one: none is counted twice
        return self.pages


def render_pdf(html: str, *, timeout: float = 60, max_pages: int = MAX_PAGES) -> bytes:
    """Render one HTML document to PDF bytes, or raise RenderError saying what a person can fix.

    wkhtmltopdf is stopped as soon as it has written more than ``max_pages`` pages (this Debian build prints no
    "Page N of M" progress; its output file grows page by page and is counted while it runs) or runs past
    ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="bulksign-pdf-") as folder:
        out = Path(folder) / "out.pdf"
        # pdfkit builds the command line; it is run here because pdfkit has no timeout.
        options = {k: v for k, v in WKHTMLTOPDF_OPTIONS.items() if k != "quiet"}  # stderr names failures
        kit = pdfkit.PDFKit(html, "string", options=options, configuration=_configuration())
        try:
            # In the sandbox (no network, nothing of ours to read) whatever the template check missed.
            args = sandbox.command(kit.command(str(out)), folder=folder)
            proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={**os.environ, "XDG_RUNTIME_DIR": folder},
            )
        except (sandbox.SandboxError, OSError) as exc:
            raise RenderError(
                N_("The PDF renderer is not available on this server."), transient=True, detail=str(exc)
            ) from None
        stderr = _watch(proc, html.encode("utf-8"), pages=_PageCounter(out), timeout=timeout, max_pages=max_pages)
        if proc.returncode != 0:
            blocked = _BLOCKED.search(stderr)
            if blocked:
                # wkhtmltopdf writes a PDF even then; using it would hide a broken document.
                raise RenderError(
                    N_(
                        "The template loads an external or local resource (image, style, frame) that "
                        "is not allowed. Embed images as data: URLs and styles inline."
                    ),
                    detail=stderr[-2000:],
                )
            raise RenderError(
                N_("The PDF renderer failed on this document."), transient=proc.returncode < 0, detail=stderr[-2000:]
            )
        data = out.read_bytes() if out.exists() else b""
        if not data.startswith(b"%PDF"):
            raise RenderError(N_("The PDF renderer produced no document."), transient=True, detail=stderr[-2000:])
        return data


def _watch(proc: subprocess.Popen, html: bytes, *, pages: _PageCounter, timeout: float, max_pages: int) -> str:
    """Feed ``proc`` the HTML and wait for it, counting its pages as they are written; its stderr. Kills it and
    raises RenderError (not transient: the same document would do the same again) past either limit."""
    deadline = time.monotonic() + timeout
    stderr: list[bytes] = []
    # communicate() in a thread of its own: called again after a timeout it cannot go on writing the input.
    talk = threading.Thread(target=lambda: stderr.append(proc.communicate(html)[1]), name="wkhtmltopdf-io")
    talk.start()
    while talk.is_alive():
        talk.join(_WATCH_SECONDS)
        if pages.count() > max_pages:
            _kill(proc, talk)
            raise RenderError(too_long(max_pages), transient=False)
        if time.monotonic() > deadline:
            _kill(proc, talk)
            raise RenderError(
                N_(
                    "The document took longer than %(n)s s to render. Simplify the template (fewer or "
                    "smaller images, shorter tables).",
                    n=f"{timeout:g}",
                ),
                transient=False,
            )
    if not stderr:  # communicate() itself failed (not a broken pipe: that it ignores)
        _kill(proc, talk)
        raise RenderError(N_("The PDF renderer failed on this document."), transient=True)
    return stderr[0].decode("utf-8", "replace")


def _kill(proc: subprocess.Popen, talk: threading.Thread) -> None:
    # The sandbox's bwrap: its child, wkhtmltopdf, dies with it (--die-with-parent); the pipes close.
    proc.kill()
    talk.join()


def _configuration():
    return pdfkit.configuration(wkhtmltopdf=WKHTMLTOPDF)
