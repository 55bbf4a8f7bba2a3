"""Documents converted one at a time in a helper thread, and stored where a request's original is kept.
More in docs/architecture/documents.md."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from bulksign.core.extensions import get_redis
from bulksign.documents.storage import get_storage
from bulksign.models.requests import version_suffix
from bulksign.ops import telemetry


@dataclass(frozen=True)
class Made:
    """A converted document, and what its marks are read from (the PDF itself, or a lighter view of it)."""

    pdf: bytes
    marked: bytes
    #: How long it took to render (its share of the run's time, when rendered with others).
    seconds: float = 0.0


@dataclass(frozen=True)
class Converting:
    """A document handed to the converter; its result is ``(pdf bytes, seconds)``."""

    result: Future
    #: Where its marks are looked for, if not in the PDF itself (``together.Part.marks_view``).
    marks_view: bytes | None = None

    def made(self) -> Made:
        """Wait for the PDF (raising what its conversion raised); its time goes to the figures with its chunk's
        (``record_times``)."""
        pdf, seconds = self.result.result()
        return Made(pdf, self.marks_view or pdf, seconds)


class Converter:
    """A worker's converter thread, as a context manager: documents queue and convert one after another."""

    def __enter__(self) -> Converter:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="wkhtmltopdf")
        return self

    def __exit__(self, *exc) -> None:
        self._thread.shutdown(wait=True)

    def start(self, convert: Callable[[], bytes]) -> Converting:
        """Queue ``convert``; it starts when the document before it is done."""
        return Converting(self._thread.submit(_timed, convert))

    @staticmethod
    def ready(pdf: bytes, seconds: float, *, marks_view: bytes | None = None) -> Converting:
        """A document already converted (with others, in one run), and its share of the run's time."""
        done: Future = Future()
        done.set_result((pdf, seconds))
        return Converting(done, marks_view=marks_view)


def record_times(seconds: list[float]) -> None:
    """Count documents' render times (``Made.seconds``) in the render figures, in one round trip to Redis (one a
    document was a twentieth of a render worker's own CPU for documents rendered together)."""
    if seconds:
        with telemetry.record(get_redis()) as figures:
            for each in seconds:
                figures.observe(telemetry.PDF_RENDER, (), each)


def _timed(convert: Callable[[], bytes]) -> tuple[bytes, float]:
    started = time.perf_counter()
    return convert(), time.perf_counter() - started


def original_key(*, batch_id: int, request_id: int, version: int = 1) -> str:
    """Where a request's rendered PDF is kept; each corrected version under its own name, the earlier ones kept."""
    return f"batches/{batch_id}/requests/{request_id}/original{version_suffix(version)}.pdf"


def store_original(key: str, pdf: bytes) -> None:
    """Store a request's rendered PDF at ``key``; raises ``StorageError``."""
    get_storage().put(key, pdf, content_type="application/pdf")
