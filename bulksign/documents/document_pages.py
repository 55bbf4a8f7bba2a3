"""The document as the recipient's page shows it: page images rendered on the server, and each page's text.
More in docs/architecture/documents.md."""

from __future__ import annotations

import json
import logging
import posixpath
from dataclasses import dataclass
from io import BytesIO

from PIL import Image
from redis import Redis
from redis.exceptions import LockError

from bulksign.core.logs import log
from bulksign.documents.poppler import page_png, page_words
from bulksign.documents.storage import Storage
from bulksign.models import Document

logger = logging.getLogger(__name__)

#: Image width in pixels: the 760 px recipient column at 2 device pixels per CSS pixel (a phone at
#: 360 px × 3 needs 1,080). Wider costs render time and bytes for nothing a screen shows.
PAGE_WIDTH_PX = 1400
#: Longest wait for another process rendering the same page, before rendering it here as well.
LOCK_WAIT_SECONDS = 20
#: The manifest's layout; a new one renders again instead of misreading an old one.
MANIFEST_VERSION = 2


@dataclass(frozen=True)
class PageView:
    """One page: ``number`` from 1, the image's size in pixels, the text as paragraphs, its size in points (crop
    box: what places in points, e.g. ``Document.field_boxes``, are laid over the image by)."""

    number: int
    width_px: int
    height_px: int
    paragraphs: tuple[str, ...]
    width_pt: float
    height_pt: float


@dataclass(frozen=True)
class DocumentPages:
    document_id: int
    pages: tuple[PageView, ...]


def pages_folder(document: Document) -> str:
    """Where the page images of ``document`` and their manifest are kept (the retention purge deletes them)."""
    return f"{posixpath.dirname(document.storage_key)}/pages/{document.id}"


def image_key(document: Document, number: int) -> str:
    return f"{pages_folder(document)}/{number}.webp"


def document_pages(*, storage: Storage, document: Document) -> DocumentPages:
    """The pages of ``document`` with their image sizes and text; read once with pdftotext, then from storage."""
    key = f"{pages_folder(document)}/pages.json"
    if storage.exists(key):
        data = json.loads(storage.get(key))
        if data.get("version") == MANIFEST_VERSION:
            return DocumentPages(
                document_id=document.id,
                pages=tuple(
                    PageView(
                        number=p["number"],
                        width_px=p["width_px"],
                        height_px=p["height_px"],
                        paragraphs=tuple(p["paragraphs"]),
                        width_pt=p["width_pt"],
                        height_pt=p["height_pt"],
                    )
                    for p in data["pages"]
                ),
            )
    pages = page_views(storage.get(document.storage_key))
    storage.put(
        key,
        json.dumps(
            {
                "version": MANIFEST_VERSION,
                "pages": [
                    {
                        "number": p.number,
                        "width_px": p.width_px,
                        "height_px": p.height_px,
                        "paragraphs": list(p.paragraphs),
                        "width_pt": p.width_pt,
                        "height_pt": p.height_pt,
                    }
                    for p in pages
                ],
            },
            ensure_ascii=False,
        ).encode("utf-8"),
        content_type="application/json",
    )
    return DocumentPages(document_id=document.id, pages=pages)


def page_views(pdf: bytes) -> tuple[PageView, ...]:
    """The pages of ``pdf`` with their image sizes and text, read with pdftotext (a document's, or a preview's that
    is never stored)."""
    return tuple(
        PageView(
            number=i,
            width_px=PAGE_WIDTH_PX,
            height_px=round(PAGE_WIDTH_PX * page.height / page.width),
            paragraphs=page.paragraphs,
            width_pt=page.width,
            height_pt=page.height,
        )
        for i, page in enumerate(page_words(pdf), start=1)
    )


def page_image(*, storage: Storage, redis: Redis, document: Document, number: int) -> bytes | None:
    """Page ``number`` of ``document`` as WebP, rendered on first use; None when it has no such page."""
    if number < 1 or number > len(document_pages(storage=storage, document=document).pages):
        return None
    key = image_key(document, number)
    if storage.exists(key):
        return storage.get(key)
    lock = redis.lock(f"bulksign:page-image:{document.id}:{number}", timeout=60)
    locked = lock.acquire(blocking_timeout=LOCK_WAIT_SECONDS)
    try:
        if storage.exists(key):  # rendered by whoever held the lock
            return storage.get(key)
        data = _webp(page_png(storage.get(document.storage_key), number=number, width_px=PAGE_WIDTH_PX))
        storage.put(key, data, content_type="image/webp")
        log(logger, logging.INFO, "page image rendered", document_id=document.id, page=number, size=len(data))
        return data
    finally:
        if locked:
            try:
                lock.release()
            except LockError:  # held past its timeout and taken over: the image is stored all the same
                pass


def _webp(png: bytes) -> bytes:
    out = BytesIO()
    # Lossless: text stays sharp and, being mostly flat white, compresses best this way (method 4: ~0.3 s a page).
    Image.open(BytesIO(png)).save(out, format="WEBP", lossless=True, method=4)
    return out.getvalue()
