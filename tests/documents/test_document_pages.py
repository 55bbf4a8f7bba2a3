"""The recipient's page shows the document as page images rendered once on the server, with each page's text."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from PIL import Image
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.documents import document_pages
from bulksign.documents.document_pages import PAGE_WIDTH_PX, image_key
from bulksign.documents.storage import get_storage
from bulksign.models import Document, utcnow
from bulksign.signing.recipient_actions import decline
from tests.support.batches import TWO_PAGES
from tests.support.races import race
from tests.support.signing_requests import make_sent_request


@pytest.fixture
def sent(app, users):
    return make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"], html=TWO_PAGES)


def _original(request_id: int) -> Document:
    return db.session.scalar(select(Document).where(Document.request_id == request_id, Document.kind == "original"))


@pytest.fixture
def renders(monkeypatch):
    """Counts pdftoppm runs."""
    calls = []
    real = document_pages.page_png

    def counting(pdf, **kwargs):
        calls.append(kwargs["number"])
        return real(pdf, **kwargs)

    monkeypatch.setattr(document_pages, "page_png", counting)
    return calls


def test_the_page_lists_every_page_image_and_its_text(client, sent):
    html = client.get(f"/sign/{sent.token}").get_data(as_text=True)
    for number in (1, 2):
        assert f'src="/sign/{sent.token}/pages/{number}"' in html and f'alt="Page {number} of 2"' in html
    assert f'src="/sign/{sent.token}/pages/3"' not in html
    assert 'width="1400" height="1981"' in html  # A4 in proportion: the browser keeps the place while it loads
    assert "<p>Работник: Иван Петров.</p>" in html and "<p>Конец договора.</p>" in html
    assert f"/sign/{sent.token}/document?download=1" in html


def test_a_page_image_is_rendered_once_then_served_from_storage(client, sent, renders):
    first = client.get(f"/sign/{sent.token}/pages/2")
    assert first.status_code == 200 and first.mimetype == "image/webp"
    image = Image.open(io.BytesIO(first.data))
    assert image.format == "WEBP" and image.size[0] == PAGE_WIDTH_PX and abs(image.size[1] - 1981) <= 1
    assert first.headers["Cache-Control"] == "no-store" and first.headers["Referrer-Policy"] == "no-referrer"
    assert first.headers["X-Content-Type-Options"] == "nosniff"
    assert get_storage().get(image_key(_original(sent.id), 2)) == first.data
    assert client.get(f"/sign/{sent.token}/pages/2").data == first.data
    assert renders == [2]
    assert client.get(f"/sign/{sent.token}/pages/3").status_code == 404
    assert client.get(f"/sign/{sent.token}/pages/0").status_code == 404
    assert client.get(f"/sign/{'x' * 43}/pages/1").status_code == 404


def test_two_tabs_opening_at_once_render_a_page_once(app, sent, renders):
    def fetch(_n: int) -> bytes:
        with app.test_client() as client:
            return client.get(f"/sign/{sent.token}/pages/1").data

    results = list(race(app, fetch, callers=3).values())
    assert len(results) == 3 and len(set(results)) == 1 and results[0][:4] == b"RIFF"
    assert renders == [1]


def test_a_link_that_can_no_longer_sign_shows_no_pages(client, sent):
    decline(db.session, request_id=sent.id, now=utcnow(), reason="no", ip=None, user_agent=None)
    db.session.commit()
    assert client.get(f"/sign/{sent.token}/pages/1").status_code == 410
    assert "/pages/1" not in client.get(f"/sign/{sent.token}").get_data(as_text=True)


def test_without_readable_pages_the_page_still_offers_the_download(client, sent):
    get_storage().put(_original(sent.id).storage_key, b"%PDF-1.4 broken")
    html = client.get(f"/sign/{sent.token}").get_data(as_text=True)
    assert "/pages/1" not in html and "download it to read it" in html and "document?download=1" in html
    assert client.get(f"/sign/{sent.token}/pages/1").status_code == 503
