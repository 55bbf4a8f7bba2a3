"""The staff dashboard: batch list, recipients table (filters, keyset pages, select-all), timeline, no tokens."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import event, select

from bulksign.batches import bulk_actions, dashboard, recipients_table
from bulksign.batches.recipients_table import DashboardError, RecipientFilter
from bulksign.core.extensions import db
from bulksign.models import Event, OutgoingMail, SigningRequest
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW

MIX = ["sent"] * 5 + ["opened"] * 3 + ["signed"] * 4 + ["bounced"] * 2 + ["failed"] + ["pending"] * 3


@pytest.fixture
def batch(app, users):
    return batch_in_states(db.session, statuses=MIX, now=NOW, name="Employment contracts", user_id=users["staff"].id)


def test_batch_list_shows_name_template_owner_and_counts_from_the_database(client, auth, batch):
    auth.login()
    page = client.get("/batches/").get_data(as_text=True)
    assert "Employment contracts" in page and "Employment contracts template" in page and "staff@example.com" in page
    assert 'data-status="signed" data-count="4"' in page and 'data-status="waiting" data-count="3"' in page


def test_batch_list_search_by_name_and_newest_first(client, auth, batch, users):
    batch_in_states(db.session, statuses=["sent"], now=NOW + timedelta(hours=1), name="Newer NDA")
    auth.login()
    page = client.get("/batches/").get_data(as_text=True)
    assert page.index("Newer NDA") < page.index("Employment contracts")
    found = client.get("/batches/?q=nda").get_data(as_text=True)
    assert "Newer NDA" in found and "Employment contracts" not in found
    empty = client.get("/batches/?q=zzz").get_data(as_text=True)
    assert "No batch name contains" in empty


def test_not_opened_filter_lists_sent_requests_whose_link_was_never_opened(app, batch):
    page = recipients_table.recipients_page(db.session, batch_id=batch.id, flt=RecipientFilter(status="not_opened"))
    assert len(page.items) == 5 and {r.status for r in page.items} == {"sent"}


@pytest.mark.parametrize("status,expected", [("signed", 4), ("problems", 3), ("waiting", 3), ("", len(MIX))])
def test_status_filters_count(app, batch, status, expected):
    assert (
        recipients_table.count_matching(db.session, batch_id=batch.id, flt=RecipientFilter(status=status)) == expected
    )


def test_search_by_email_or_name(app, batch):
    by_email = recipients_table.recipients_page(db.session, batch_id=batch.id, flt=RecipientFilter(q="person000003@"))
    by_name = recipients_table.recipients_page(db.session, batch_id=batch.id, flt=RecipientFilter(q="Person 000004"))
    assert [r.email for r in by_email.items] == ["person000003@example.org"]
    assert [r.name for r in by_name.items] == ["Person 000004"]
    # LIKE wildcards are text, not patterns
    assert not recipients_table.recipients_page(db.session, batch_id=batch.id, flt=RecipientFilter(q="%")).items


@pytest.mark.parametrize("sort", ["row", "email", "name", "status", "updated"])
@pytest.mark.parametrize("desc", [False, True])
def test_keyset_pages_walk_every_row_once_in_order(app, batch, sort, desc):
    flt = RecipientFilter(sort=sort, desc=desc)
    seen, cursor = [], None
    for _ in range(20):
        page = recipients_table.recipients_page(db.session, batch_id=batch.id, flt=flt, cursor=cursor, limit=4)
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(MIX) and len({r.id for r in seen}) == len(MIX)
    keys = [(getattr(r, recipients_table.SORTS[sort].key), r.id) for r in seen]
    assert keys == sorted(keys, reverse=desc)


def test_a_forged_or_foreign_cursor_is_a_clear_400(client, auth, batch):
    auth.login()
    response = client.get(f"/batches/{batch.id}/requests?cursor=bm9wZQ")
    assert response.status_code == 400 and "cursor is not valid" in response.get_data(as_text=True)
    cursor = recipients_table.encode_cursor(RecipientFilter(sort="email"), "a@b", 1)
    with pytest.raises(DashboardError):
        recipients_table.recipients_page(db.session, batch_id=batch.id, flt=RecipientFilter(sort="name"), cursor=cursor)
    assert client.get(f"/batches/{batch.id}/requests?sort=password").status_code == 400


def test_select_all_matching_resolves_every_id_on_the_server_in_pages(app, batch):
    other = batch_in_states(db.session, statuses=["sent"] * 3, now=NOW, name="Other")
    selection = recipients_table.resolve_selection(
        db.session, batch_id=batch.id, request_ids=[], select_all=True, flt=RecipientFilter(status="sent")
    )
    assert len(selection.request_ids) == 5
    pages = list(recipients_table.matching_id_pages(db.session, batch_id=batch.id, flt=RecipientFilter(), page_size=7))
    assert [len(p) for p in pages] == [7, 7, 4]
    # ids of another batch are dropped from a hand-made selection
    foreign = db.session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == other.id)).all()
    picked = recipients_table.resolve_selection(
        db.session, batch_id=batch.id, request_ids=[*foreign, pages[0][0]], select_all=False, flt=RecipientFilter()
    )
    assert picked.request_ids == (pages[0][0],)


def test_timeline_shows_events_mails_and_what_to_do_about_a_bounce(client, auth, batch):
    bounced = db.session.scalar(
        select(SigningRequest).where(SigningRequest.batch_id == batch.id, SigningRequest.status == "bounced").limit(1)
    )
    db.session.add(Event(request_id=bounced.id, batch_id=batch.id, type="status.sent", created_at=NOW))
    db.session.add(
        OutgoingMail(
            request_id=bounced.id,
            batch_id=batch.id,
            kind="invitation",
            message_id="<x@y>",
            to_email=bounced.email,
            status="bounced",
            error="550 5.1.1 no such user",
            created_at=NOW,
        )
    )
    db.session.commit()
    auth.login()
    html = client.get(f"/batches/{batch.id}/requests/{bounced.id}").get_data(as_text=True)
    assert "Fix the email address, then resend with a new link" in html
    assert "The mailbox does not exist" in html and "invitation mail" in html
    assert client.get(f"/batches/{batch.id + 99}/requests/{bounced.id}").status_code == 404


def test_no_staff_page_shows_a_signing_token_or_nonce(client, auth, batch):
    rows = db.session.execute(
        select(SigningRequest.id, SigningRequest.token_hash, SigningRequest.token_nonce).where(
            SigningRequest.batch_id == batch.id
        )
    ).all()
    auth.login()
    pages = [
        client.get("/batches/"),
        client.get(f"/batches/{batch.id}"),
        client.get(f"/batches/{batch.id}/progress"),
        client.get(f"/batches/{batch.id}/requests?status=sent"),
        client.get(f"/batches/{batch.id}/export.csv"),
    ]
    pages += [client.get(f"/batches/{batch.id}/requests/{r.id}") for r in rows[:5]]
    for response in pages:
        assert response.status_code == 200
        body = response.get_data(as_text=True)
        assert "/sign/" not in body
        for r in rows:
            assert r.token_hash not in body and r.token_nonce not in body


def test_progress_fragment_polls_while_active_and_stops_when_final(client, auth, batch):
    auth.login()
    active = client.get(f"/batches/{batch.id}/progress").get_data(as_text=True)
    assert 'hx-trigger="every 2s"' in active
    batch.status = "closed"
    db.session.commit()
    final = client.get(f"/batches/{batch.id}/progress").get_data(as_text=True)
    assert "hx-trigger" not in final and 'data-count="4"' in final


def _dispatched(batch, *, started, sent):
    """The batch started at ``started``; its dispatched requests were sent at the times of ``sent``, in turn."""
    from sqlalchemy import update

    from bulksign.models import Batch

    db.session.execute(update(Batch).where(Batch.id == batch.id).values(started_at=started))
    ids = db.session.scalars(
        select(SigningRequest.id)
        .where(SigningRequest.batch_id == batch.id, SigningRequest.sent_at.is_not(None))
        .order_by(SigningRequest.id)
    ).all()
    for rid, at in zip(ids, sent):
        db.session.execute(update(SigningRequest).where(SigningRequest.id == rid).values(sent_at=at))
    db.session.commit()
    db.session.expire_all()


def test_the_rate_counts_only_since_the_batch_started_and_gives_the_time_left(app, batch):
    # 15 invitations in the 60 seconds since the batch started: 15 per minute, not 15 per 2-minute window.
    _dispatched(batch, started=NOW - timedelta(seconds=60), sent=[NOW - timedelta(seconds=i) for i in range(15)])
    rate = dashboard.throughput(db.session, batch=batch, working=30, now=NOW)
    assert rate.per_minute == pytest.approx(15)
    assert rate.eta == timedelta(minutes=2)


def test_no_estimate_until_there_is_a_basis_for_one(app, batch):
    _dispatched(batch, started=NOW - timedelta(seconds=5), sent=[NOW] * 15)
    assert dashboard.throughput(db.session, batch=batch, working=3, now=NOW) == dashboard.Throughput(None, None)
    _dispatched(batch, started=NOW - timedelta(minutes=1), sent=[NOW] * 2 + [NOW - timedelta(hours=1)] * 13)
    assert dashboard.throughput(db.session, batch=batch, working=3, now=NOW).per_minute is None


def test_the_bar_says_preparing_documents_while_pdfs_render_and_no_estimate_without_a_basis(client, auth, batch):
    auth.login()
    fragment = client.get(f"/batches/{batch.id}/progress").get_data(as_text=True)
    assert "preparing documents 15/18" in fragment
    assert 'id="throughput"' not in fragment and 'id="eta"' not in fragment


def test_the_bar_shows_the_delivery_rate_of_the_invitations_that_got_an_answer(client, auth, batch, users):
    auth.login()
    # MIX: 12 accepted (sent, opened, signed), 2 bounced; the failed and pending ones got no answer yet.
    fragment = client.get(f"/batches/{batch.id}/progress").get_data(as_text=True)
    assert re.search(r'class="delivery-rate" id="delivery-rate"[^>]*>\s*Delivered 85.7% \(12 of 14\)', fragment)
    # Over 5% bounced of 20 or more answers (the bounce-rate alert's rule): shown as a problem.
    poor = batch_in_states(
        db.session, statuses=["sent"] * 18 + ["bounced"] * 2, now=NOW, name="Poor", user_id=users["staff"].id
    )
    assert 'class="delivery-rate poor"' in client.get(f"/batches/{poor.id}/progress").get_data(as_text=True)
    fresh = batch_in_states(db.session, statuses=["pending"] * 3, now=NOW, name="Fresh", user_id=users["staff"].id)
    assert 'id="delivery-rate"' not in client.get(f"/batches/{fresh.id}").get_data(as_text=True)


@pytest.mark.parametrize(
    "statuses, batch_status, words, tone",
    [
        (["sent"] * 2 + ["pending"], "processing", "sending", "progress"),
        (["sent", "opened", "signed"], "awaiting_signatures", "waiting for signatures", "waiting"),
        (["signed"] * 3, "all_signed", "all signed", "success"),
        (["signed", "expired", "declined"], "closed", "closed with 2 unsigned", "warning"),
        (["signed", "sent", "bounced"], "partially_failed", "partly failed (1)", "danger"),
    ],
)
def test_batch_states_are_named_in_staff_words_and_coloured_by_meaning(
    client, auth, users, statuses, batch_status, words, tone
):
    made = batch_in_states(
        db.session, statuses=statuses, now=NOW, name="States", user_id=users["staff"].id, batch_status=batch_status
    )
    auth.login()
    fragment = client.get(f"/batches/{made.id}/progress").get_data(as_text=True)
    state = re.search(r'<span class="state state-(\w+) tone-(\w+)" id="batch-status">([^<]+)</span>', fragment)
    assert (state.group(3), state.group(2)) == (words, tone)
    listing = client.get("/batches/").get_data(as_text=True)
    assert f'tone-{tone}">{words}</span>' in listing


class QueryCounter:
    def __init__(self, engine):
        self.engine, self.count = engine, 0

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._hit)
        return self

    def _hit(self, *args, **kwargs):
        self.count += 1

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self._hit)


def _fresh_request_state():
    """The test shares the client's app context: start each request with an empty session and no cached user."""
    from flask import g

    db.session.remove()
    g.pop("_login_user", None)
    g.pop("_flask_babel", None)  # Flask-Babel caches the locale on g


def test_pages_run_a_constant_number_of_queries_whatever_the_number_of_rows(client, auth, users):
    auth.login()
    small = batch_in_states(db.session, statuses=["sent"] * 3, now=NOW, name="Small", user_id=users["staff"].id)
    big = batch_in_states(db.session, statuses=MIX * 10, now=NOW, name="Big", user_id=users["admin"].id)
    urls = [
        "/batches/{id}",
        "/batches/{id}/progress",
        "/batches/{id}/requests?status=sent",
        "/batches/{id}/requests?sort=email",
    ]
    small_id, big_id = small.id, big.id
    for url in urls:
        counts = []
        for batch_id in (small_id, big_id):
            _fresh_request_state()
            with QueryCounter(db.engine) as counter:
                assert client.get(url.format(id=batch_id)).status_code == 200
            counts.append(counter.count)
        assert counts[0] == counts[1], url
    listing = []
    for extra in range(2):
        batch_in_states(db.session, statuses=["sent"] * 2, now=NOW, name=f"More {extra}")
        _fresh_request_state()
        with QueryCounter(db.engine) as counter:
            client.get("/batches/")
        listing.append(counter.count)
    assert listing[0] == listing[1]


def test_csv_export_link_keeps_the_filter(client, auth, batch):
    auth.login()
    html = client.get(f"/batches/{batch.id}?status=signed&q=Person").get_data(as_text=True)
    assert re.search(r'export\.csv\?[^"]*status=signed', html)


def _bulk(client, batch_id, **form):
    page = client.get(f"/batches/{batch_id}")
    from tests.support.web import csrf_from

    return client.post(
        f"/batches/{batch_id}/actions", data={"csrf_token": csrf_from(page), **form}, follow_redirects=True
    )


def test_select_all_matching_then_remind_queues_one_reminder_per_matching_request(client, auth, batch):
    auth.login()
    html = _bulk(client, batch.id, action="remind", select_all="1", status="not_opened").get_data(as_text=True)
    assert "5 reminders queued." in html
    mails = db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == "reminder")).all()
    assert len(mails) == 5 and all(m.to_email.endswith("@example.org") for m in mails)


def test_cancel_selected_rows_and_empty_selection_message(client, auth, batch):
    auth.login()
    ids = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch.id, SigningRequest.status == "sent").limit(2)
    ).all()
    html = _bulk(client, batch.id, action="cancel", request_ids=[str(i) for i in ids], confirmed="1").get_data(
        as_text=True
    )
    assert "2 requests cancelled" in html
    assert "Select at least one recipient" in _bulk(client, batch.id, action="cancel").get_data(as_text=True)
    assert _bulk(client, batch.id, action="cancel", request_ids=["x"]).status_code == 400


def test_retry_failed_from_the_page_puts_them_back_in_the_pipeline(client, auth, batch):
    auth.login()
    html = _bulk(client, batch.id, action="retry", select_all="1", status="problems").get_data(as_text=True)
    assert "1 failed request is being prepared and sent again." in html
    from bulksign.work.queues import get_queue

    assert get_queue("pdf").count == 1


def test_someone_elses_batch_cannot_be_cancelled_by_staff(client, auth, users):
    other = batch_in_states(db.session, statuses=["sent"], now=NOW, user_id=users["admin"].id, name="Admin's")
    auth.login()
    html = _bulk(client, other.id, action="cancel_batch").get_data(as_text=True)
    assert "Only the batch&#39;s owner, a manager of its team or an admin can do this." in html


def test_a_refusal_reaches_russian_staff_in_russian(client, auth, users):
    other = batch_in_states(db.session, statuses=["sent"], now=NOW, user_id=users["admin"].id, name="Admin's")
    users["staff"].locale = "ru"
    db.session.commit()
    other_id = other.id
    auth.login()
    _fresh_request_state()
    html = _bulk(client, other_id, action="cancel_batch").get_data(as_text=True)
    assert "Это может сделать только владелец рассылки, руководитель её команды или администратор." in html
    _fresh_request_state()
    assert "Рассылки с таким номером нет." in client.get("/batches/999").get_data(as_text=True)
    _fresh_request_state()
    assert "По этому адресу ничего нет." in client.get("/no-such-page").get_data(as_text=True)


@pytest.mark.parametrize("status", ["", "signed", "waiting", "problems", "not_opened"])
@pytest.mark.parametrize("q", ["", "person00001"])
def test_matching_count_from_the_batch_counts_equals_the_counted_one(app, batch, status, q):
    from bulksign.batches.progress import counts_for

    flt = RecipientFilter(status=status, q=q)
    counts = counts_for(db.session, [batch.id])[batch.id]
    assert recipients_table.count_matching(
        db.session, batch_id=batch.id, flt=flt, counts=counts
    ) == recipients_table.count_matching(db.session, batch_id=batch.id, flt=flt)


def test_batch_page_shows_deadline_reminder_schedule_throughput_and_eta(client, auth, batch):
    auth.login()
    html = client.get(f"/batches/{batch.id}").get_data(as_text=True)
    assert "on days 2, 4 after the invitation (at most 3)" in html and "7 days after sending" in html
    fragment = client.get(f"/batches/{batch.id}/progress").get_data(as_text=True)
    assert "18 recipients" in fragment and "preparing documents 15/18" in fragment


def test_unknown_batch_is_404_everywhere(client, auth, users):
    auth.login()
    for url in ("/batches/999", "/batches/999/progress", "/batches/999/requests", "/batches/999/export.csv"):
        assert client.get(url).status_code == 404, url


def test_staff_pages_render_in_russian(client, auth, batch, users):
    users["staff"].locale = "ru"
    db.session.commit()
    batch_id = batch.id
    auth.login()
    _fresh_request_state()
    listing = client.get("/batches/").get_data(as_text=True)
    assert "Рассылки" in listing and 'lang="ru"' in listing
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "подписано" in page and "Выгрузить этих получателей (CSV)" in page
    bounced = db.session.scalar(
        select(SigningRequest.id)
        .where(SigningRequest.batch_id == batch_id, SigningRequest.status == "bounced")
        .limit(1)
    )
    _fresh_request_state()
    assert "Что можно сделать:" in client.get(f"/batches/{batch_id}/requests/{bounced}").get_data(as_text=True)


def test_a_large_select_all_runs_in_a_background_job(client, auth, batch, run_jobs, monkeypatch):
    monkeypatch.setattr(bulk_actions, "INLINE_LIMIT", 3)
    auth.login()
    html = _bulk(client, batch.id, action="remind", select_all="1", status="not_opened").get_data(as_text=True)
    assert "being applied to 5 recipients in the background" in html
    assert not db.session.scalars(select(OutgoingMail.id)).all()
    run_jobs("default")
    with db.engine.connect() as conn:
        assert len(conn.execute(select(OutgoingMail.id).where(OutgoingMail.kind == "reminder")).all()) == 5


def test_the_progress_poll_refreshes_the_rows_on_screen_in_place(client, auth, batch):
    auth.login()
    page = client.get(f"/batches/{batch.id}").get_data(as_text=True)
    shown = re.findall(r'class="shown-id" name="shown" value="(\d+)"', page)
    assert len(shown) == 18 and 'hx-include=".shown-id"' in page
    first = int(shown[0])
    db.session.execute(db.update(SigningRequest).where(SigningRequest.id == first).values(status="signed"))
    db.session.commit()
    fragment = client.get(f"/batches/{batch.id}/progress", query_string={"shown": shown[:2]}).get_data(as_text=True)
    # Only the status cells of the rows on screen come back, to be swapped out of band (checkboxes stay).
    assert f'<span id="st-{first}" class="live-cell" hx-swap-oob="true"><span class="badge badge-signed">' in fragment
    assert f'id="st-{shown[2]}"' not in fragment and "row-check" not in fragment


def test_the_table_keeps_its_filter_and_sort_in_the_address_bar(client, auth, batch):
    auth.login()
    response = client.get(
        f"/batches/{batch.id}/requests?status=sent&sort=email&dir=desc", headers={"HX-Request": "true"}
    )
    assert response.headers["HX-Push-Url"] == f"/batches/{batch.id}?status=sent&sort=email&dir=desc"
