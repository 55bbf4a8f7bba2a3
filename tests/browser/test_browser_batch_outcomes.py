"""The batch page in a real Chromium in its new states: awaiting signatures with the
deadline's date and the rows left out, all signed, closed with some unsigned; English and Russian, 1366 and 360 px."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bulksign.batches.progress import mark_batch_started
from bulksign.batches.skipped_rows import keep_skipped_rows
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.core.messages import N_
from bulksign.jobs.periodic import rollup_batches
from bulksign.models import Batch
from bulksign.models.status import Status
from bulksign.recipients.row_checks import RowError
from tests.support.accounts import STAFF
from tests.support.clock import NOW
from tests.support.looks import log_in, look_at
from tests.support.waiting import sent_batch as invited

pytestmark = pytest.mark.browser
DAY = timedelta(days=1)


def sent_batch(**fields) -> tuple[int, list[int]]:
    batch_id, ids = invited(**fields)
    mark_batch_started(db.session, batch_id=batch_id, now=fields["sent_at"])
    return batch_id, ids


def _sign(request_id, at, to=Status.SIGNED):
    transition(db.session, request_id, frm=Status.SENT, to=Status.OPENED, now=at)
    transition(db.session, request_id, frm=Status.OPENED, to=to, now=at)


def _batches(user) -> dict[str, int]:
    waiting, ids = sent_batch(user=user, sent_at=NOW, recipients=5, name="Contracts 2027", timezone="Europe/Berlin")
    _sign(ids[0], NOW + DAY)
    keep_skipped_rows(
        db.session,
        batch_id=waiting,
        errors=[
            RowError(7, "email", N_("This is not a valid email address."), values={"email": "anna@", "name": "Anna"}),
            RowError(9, "name", N_("Empty value"), values={"email": "bob@example.com", "name": ""}),
        ],
        kept_rows=set(),
    )
    db.session.get(Batch, waiting).skipped_count = 2
    signed, ids = sent_batch(user=user, sent_at=NOW, recipients=3, name="NDA", timezone="Europe/Moscow")
    for request_id in ids:
        _sign(request_id, NOW + DAY)
    closed, ids = sent_batch(user=user, sent_at=NOW, recipients=4, name="Bonus letters")
    _sign(ids[0], NOW + DAY)
    _sign(ids[1], NOW + DAY, to=Status.DECLINED)
    transition(db.session, ids[2:], frm=Status.SENT, to=Status.CANCELLED, now=NOW + DAY)
    db.session.commit()
    rollup_batches(now=NOW + DAY)
    return {"awaiting": waiting, "all-signed": signed, "closed": closed}


def test_the_batch_page_names_its_state_shows_the_deadline_and_the_rows_left_out(app, users, live_server, page):
    batches = _batches(users["staff"])
    assert [db.session.get(Batch, b).status for b in batches.values()] == [
        "awaiting_signatures",
        "all_signed",
        "closed",
    ]
    log_in(page, live_server, *STAFF)
    expected = {
        "en": {
            "awaiting": "waiting for signatures",
            "all-signed": "all signed",
            "closed": "closed with 3 unsigned",
            "deadline": "9 November 2026, 10:00 (Europe/Berlin)",
            "skipped": "2 rows of the file had errors and were not sent",
        },
        "ru": {
            "awaiting": "ждёт подписей",
            "all-signed": "все подписали",
            "closed": "закрыта, без подписи 3",
            "deadline": "9 ноября 2026, 10:00 (Europe/Berlin)",
            "skipped": "2 строки файла с ошибками не отправлены",
        },
    }
    for language, words in expected.items():
        users["staff"].locale = language
        db.session.commit()
        for state, batch_id in batches.items():
            page.goto(f"{live_server}/batches/{batch_id}")
            assert page.locator("#batch-status").inner_text() == words[state]
            # Reminders and "Cancel batch" while someone can still sign; not once the batch has ended.
            still_open = state == "awaiting"
            assert page.locator(".reminder-actions").count() == int(still_open)
            assert page.locator("#cancel-batch").count() == int(still_open)
            if state == "awaiting":
                assert words["deadline"] in page.locator("#deadline").inner_text()
                assert words["skipped"] in page.locator("#skipped-rows").inner_text()
                with page.expect_download() as download:
                    page.locator("#skipped-rows a").click()
                text = open(download.value.path(), encoding="utf-8-sig").read()
                assert text.splitlines()[1].startswith('"7","email",') and "anna@" in text
            found = look_at(page, live_server, f"batch-{state}-{language}")
            assert found == {1366: [], 360: []}, found
        page.goto(f"{live_server}/batches/")
        look_at(page, live_server, f"batches-states-{language}")
