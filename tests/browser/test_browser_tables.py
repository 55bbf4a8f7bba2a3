"""Staff and admin tables on a 360 px phone: each row stacks into a card of labelled lines, nothing
scrolls sideways inside its card or widens the page, and status and progress are on the screen; in English and
Russian, with screenshots at 1366 and 360 px."""

from __future__ import annotations

import json
from email.message import EmailMessage

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.integrations import webhooks_out
from bulksign.mail.devmail import mailbox_folder, write_caught
from bulksign.models import WebhookDelivery, utcnow
from bulksign.recipients.suppressions import suppress
from tests.support.accounts import ADMIN
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.looks import log_in, shoot

pytestmark = pytest.mark.browser

#: What sticks out at the phone's width: the page's own sideways scroll, elements reaching past the viewport, and
#: boxes in the main part whose content is wider than they are (a scroll bar inside a card).
OVERFLOW = """() => {
  const width = window.innerWidth;
  const shown = e => e.offsetParent !== null || getComputedStyle(e).position === 'fixed';
  const path = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
  const out = {page: document.documentElement.scrollWidth > width + 1 ? document.documentElement.scrollWidth : null,
               wide: [], scrolling: []};
  for (const e of document.querySelectorAll('main *')) {
    if (!shown(e) || e.closest('thead')) continue;
    const box = e.getBoundingClientRect();
    if (box.width && (box.right > width + 1 || box.left < -1)) out.wide.push([path(e), Math.round(box.left), Math.round(box.right)]);
    if (e.scrollWidth > e.clientWidth + 1 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
      out.scrolling.push([path(e), e.scrollWidth, e.clientWidth]);
  }
  out.wide = out.wide.slice(0, 8);
  return out;
}"""

#: The cells a person looks for first, by page: they must be on the screen, not behind a sideways scroll.
KEY_CELLS = {
    "batches": ["table.batches td .state", "table.batches td .progress"],
    "batch": ["table.recipients td .badge"],
    "webhooks": ["#deliveries td .badge"],
}

PAGES = (
    ("/batches/", "batches"),
    ("batch", "batch"),
    ("/templates/", "templates"),
    ("/admin/", "users"),
    ("/admin/mailbox", "mailbox"),
    ("/admin/webhooks", "webhooks"),
    ("/admin/suppressions/", "suppressions"),
    ("/admin/teams", "teams"),
)


def _on_screen(page, selector: str) -> list:
    """The elements of ``selector`` that are not wholly within the 360 px viewport's width (or are not shown)."""
    return page.eval_on_selector_all(
        selector,
        """els => els.map(e => { const b = e.getBoundingClientRect();
             return {ok: b.width > 0 && b.height > 0 && b.left >= -1 && b.right <= window.innerWidth + 1,
                     left: b.left, right: b.right}; })""",
    )


def _data(users):
    for batch_name in ("Employment contracts for the autumn intake of the warehouse", "NDA"):
        batch = batch_in_states(
            db.session,
            statuses=["signed", "sent", "opened", "failed", "declined", "pending"],
            now=NOW,
            name=batch_name,
            user_id=users["admin"].id,
        )
    endpoint = webhooks_out.create_endpoint(
        db.session,
        url="https://hooks.example.com/bulksign/incoming/with/a/long/path",
        events=["request.signed"],
        user_id=users["admin"].id,
        now=utcnow(),
    )
    db.session.flush()
    for status in ("pending", "delivered", "failed"):
        db.session.add(WebhookDelivery(endpoint_id=endpoint.id, event="request.signed", payload={}, status=status))
    suppress(
        db.session,
        email="gone.for.good@old-subsidiary.example.com",
        source="bounce",
        reason="550 5.1.1 <gone.for.good@old-subsidiary.example.com>: Recipient address rejected: User unknown",
        now=utcnow(),
        batch_id=batch.id,
    )
    db.session.commit()
    return batch


def _caught_mail(app) -> None:
    mail = EmailMessage()
    mail["To"] = "someone.with.a.rather.long.address@subsidiary.example.com"
    mail["From"] = "bulksign@example.com"
    mail["Subject"] = 'Please sign: "Employment contracts for the autumn intake of the warehouse"'
    mail.set_content("Hello")
    write_caught(mailbox_folder(app.config["VAR_DIR"]), mail.as_bytes())


@pytest.mark.parametrize("language", ["en", "ru"])
def test_staff_tables_stack_on_a_phone_with_status_and_progress_in_view(app, users, live_server, page, language):
    users["admin"].locale = language
    db.session.commit()
    batch = _data(users)
    _caught_mail(app)
    log_in(page, live_server, *ADMIN)
    found = {}
    for path, name in PAGES:
        page.set_viewport_size({"width": 1366, "height": 900})
        page.goto(f"{live_server}{f'/batches/{batch.id}' if path == 'batch' else path}")
        assert page.locator("main table").count() >= 1, name
        page.set_viewport_size({"width": 360, "height": 740})
        overflow = page.evaluate(OVERFLOW)
        if overflow["page"] or overflow["wide"] or overflow["scrolling"]:
            found[name] = overflow
        # Each stacked cell says which column it is (its header), in the page's language.
        labels = page.eval_on_selector_all("main table tbody td[data-label]", "els => els.map(e => e.dataset.label)")
        assert any(labels), name
        if name == "batches":
            assert {"en": "Status", "ru": "Статус"}[language] in labels, labels
        for selector in KEY_CELLS.get(name, ()):
            cells = _on_screen(page, selector)
            assert cells and all(c["ok"] for c in cells), (name, selector, cells)
        if name == "batch":
            # The table swapped in by a filter (HTMX) is labelled too.
            page.select_option("#filter-status", "signed")
            expect(page.locator("table.recipients tbody tr")).to_have_count(1)
            expect(page.locator("table.recipients tbody td[data-label]").first).to_be_attached()
            assert _on_screen(page, "table.recipients td .badge")[0]["ok"]
            page.select_option("#filter-status", "")
            expect(page.locator("table.recipients tbody tr")).to_have_count(6)
        shoot(page, f"tables-{language}-{name}")
    assert found == {}, json.dumps(found, ensure_ascii=False, indent=1)
