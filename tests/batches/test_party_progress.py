"""Staff see a two-party batch's parties: each row's parties in their states, "waiting for <role>",
the signed count per role by the progress bar, the parties in a request's panel, their columns in the CSV; a
single-signer batch reads exactly as before parties existed."""

from __future__ import annotations

import csv
import io
import re

import pytest
from sqlalchemy import event, select, text

from bulksign.batches import bulk_actions, party_progress, recipients_table
from bulksign.batches.exports import CSV_COLUMNS
from bulksign.batches.recipients_table import DashboardError, RecipientFilter
from bulksign.core.extensions import db
from bulksign.models import SigningRequest
from bulksign.signing.parties import add_recipients
from tests.batches.test_dashboard import QueryCounter, _bulk, _fresh_request_state
from tests.support.batchdata import batch_in_states
from tests.support.batches import make_batch
from tests.support.clock import NOW
from tests.support.partydata import ROWS, make_two_party_batch


@pytest.fixture
def batch_id(app, users):
    return make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id)


def _emails(batch_id: int) -> list[str]:
    return list(
        db.session.scalars(
            select(SigningRequest.email).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )


def _rows(html: str) -> dict[str, str]:
    """Each table row's text (tags dropped, spaces squeezed), by the recipient's address."""
    found = {}
    for row in re.findall(r'<tr id="r\d+".*?</tr>', html, flags=re.S):
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip()
        found[re.search(r"person\d+@example\.org", text).group(0)] = text
    return found


def test_each_row_shows_its_parties_in_their_states_and_the_bar_the_signed_count_per_role(client, auth, batch_id):
    auth.login()
    html = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    emails = _emails(batch_id)
    rows = _rows(html)
    assert "<th>Parties</th>" in html
    assert "Recipient invited · Employer waiting for their turn" in rows[emails[0]]
    assert "Recipient has signed · Employer invited" in rows[emails[2]]
    assert "Recipient has signed · Employer has signed" in rows[emails[3]]
    assert "Recipient has signed · Employer has declined" in rows[emails[4]]
    counts = re.sub(r"\s+", " ", re.search(r'<ul class="role-counts".*?</ul>', html, flags=re.S).group(0))
    assert ">Recipient: 3 of 6 signed<" in counts and ">Employer: 1 of 6 signed<" in counts
    assert counts.index("recipient") < counts.index("employer")
    assert '<option value="employer" >waiting for Employer</option>' in html


@pytest.mark.parametrize("role, rows", [("employer", [0, 1, 2]), ("recipient", [0, 1])], ids=["employer", "recipient"])
def test_waiting_for_a_role_lists_the_open_requests_whose_party_of_that_role_has_not_signed(
    client, auth, batch_id, role, rows
):
    auth.login()
    emails = _emails(batch_id)
    html = client.get(f"/batches/{batch_id}/requests?waiting_for={role}").get_data(as_text=True)
    assert sorted(_rows(html)) == [emails[i] for i in rows]
    assert f'data-matching="{len(rows)}"' in html
    flt = RecipientFilter.parse(status="opened", q="", sort=None, direction=None, waiting_for=role)
    assert recipients_table.count_matching(db.session, batch_id=batch_id, flt=flt) == len(
        [i for i in rows if ROWS[i][0] == "opened"]
    )
    # The filter stays in the address bar, on the CSV link and in the bulk form.
    response = client.get(f"/batches/{batch_id}/requests?waiting_for={role}", headers={"HX-Request": "true"})
    assert response.headers["HX-Push-Url"] == f"/batches/{batch_id}?waiting_for={role}"
    assert f"export.csv?waiting_for={role}" in html and f'name="waiting_for" value="{role}"' in html


def test_a_role_unknown_to_the_batch_matches_nothing_and_a_malformed_one_is_a_clear_400(client, auth, batch_id):
    auth.login()
    html = client.get(f"/batches/{batch_id}/requests?waiting_for=witness").get_data(as_text=True)
    assert "No recipient matches this filter." in html
    bad = client.get(f"/batches/{batch_id}/requests?waiting_for=Employer!")
    assert bad.status_code == 400 and "A role is lower-case letters, digits and _" in bad.get_data(as_text=True)
    with pytest.raises(DashboardError):
        RecipientFilter.parse(status="", q="", sort=None, direction=None, waiting_for="x" * 41)


def test_a_large_selection_waiting_for_a_role_runs_in_the_background_on_those_rows_only(
    client, auth, batch_id, run_jobs, monkeypatch
):
    monkeypatch.setattr(bulk_actions, "INLINE_LIMIT", 1)
    auth.login()
    emails = _emails(batch_id)
    html = _bulk(client, batch_id, action="cancel", select_all="1", waiting_for="employer", confirmed="1")
    assert "being applied to 3 recipients in the background" in html.get_data(as_text=True)
    run_jobs("default")
    db.session.expire_all()
    cancelled = db.session.scalars(
        select(SigningRequest.email).where(SigningRequest.batch_id == batch_id, SigningRequest.status == "cancelled")
    )
    assert sorted(cancelled) == emails[:3]


def test_cancelling_those_waiting_for_a_role_asks_first_with_their_number(client, auth, batch_id):
    auth.login()
    html = _bulk(client, batch_id, action="cancel", select_all="1", waiting_for="recipient").get_data(as_text=True)
    # Two wait for the recipient; a third open request waits only for the employer.
    assert "Cancel 2 requests?" in html
    assert (
        db.session.scalar(
            select(db.func.count()).where(SigningRequest.batch_id == batch_id, SigningRequest.status == "cancelled")
        )
        == 0
    )


def test_the_progress_poll_refreshes_the_parties_of_the_rows_on_screen_and_the_counts(client, auth, batch_id):
    auth.login()
    shown = [
        str(i)
        for i in db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    ]
    fragment = client.get(f"/batches/{batch_id}/progress", query_string={"shown": shown[2:3]}).get_data(as_text=True)
    assert f'<span id="pt-{shown[2]}" class="live-cell parties" hx-swap-oob="true">' in fragment
    assert f'id="pt-{shown[0]}"' not in fragment and ">Employer: 1 of 6 signed<" in fragment


def test_the_request_panel_lists_its_parties_with_their_states_and_times(client, auth, batch_id):
    auth.login()
    request_id = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
    ).all()[4]
    html = client.get(f"/batches/{batch_id}/requests/{request_id}").get_data(as_text=True)
    parties = re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", " ", re.search(r'<ol class="parties-list".*?</ol>', html, re.S)[0])
    )
    assert re.search(r"Recipient · Person 000005 person000005@example\.org · has signed", parties)
    assert "Employer · ACME HR hr@example.com · has declined" in parties
    # Moves a minute apart from 10 minutes before NOW (09:00): the recipient in 3, then the employer in 2.
    assert "invited 2026-11-02 08:51 · signed 2026-11-02 08:53" in parties
    assert "invited 2026-11-02 08:54 · declined 2026-11-02 08:55" in parties
    assert "party declined" in html and "role: employer" in html


def test_the_csv_has_each_roles_address_status_and_times_after_the_usual_columns(client, auth, batch_id):
    auth.login()
    body = client.get(f"/batches/{batch_id}/export.csv").get_data(as_text=True)
    rows = list(csv.DictReader(io.StringIO(body.lstrip("\ufeff"))))
    header = next(csv.reader(io.StringIO(body.lstrip("\ufeff"))))
    assert tuple(header) == (
        *CSV_COLUMNS,
        *(
            f"{role}_{field}"
            for role in ("recipient", "employer")
            for field in ("email", "status", "invited_at", "opened_at", "signed_at", "declined_at")
        ),
    )
    assert rows[0]["employer_email"] == "hr@example.com" and rows[0]["recipient_email"] == rows[0]["email"]
    assert rows[4]["employer_declined_at"] == "2026-11-02T08:55:00+00:00"
    assert [(r["status"], r["recipient_status"], r["employer_status"]) for r in rows] == [
        (status, recipient, employer) for status, recipient, employer in ROWS
    ]
    assert rows[3]["employer_signed_at"] == "2026-11-02T08:56:00+00:00" and rows[0]["employer_signed_at"] == ""
    assert rows[3]["employer_opened_at"] == "2026-11-02T08:55:00+00:00" and rows[2]["employer_opened_at"] == ""
    filtered = client.get(f"/batches/{batch_id}/export.csv?waiting_for=recipient").get_data(as_text=True)
    assert len(list(csv.DictReader(io.StringIO(filtered.lstrip("\ufeff"))))) == 2


def test_a_single_signer_batch_reads_as_before_parties_existed(client, auth, users):
    batch = batch_in_states(db.session, statuses=["sent", "opened", "signed"], now=NOW, user_id=users["staff"].id)
    batch_id = batch.id
    auth.login()
    pages = ("", "/requests", "/progress", "/export.csv")
    before = [client.get(f"/batches/{batch_id}{page}").get_data(as_text=True) for page in pages]
    add_recipients(db.session, batch_id=batch_id, now=NOW)
    db.session.commit()
    assert party_progress.batch_parties(db.session, batch_id=batch_id).roles == ()
    after = [client.get(f"/batches/{batch_id}{page}").get_data(as_text=True) for page in pages]
    strip = re.compile(r'name="csrf_token" value="[^"]*"')
    assert [strip.sub("", html) for html in after] == [strip.sub("", html) for html in before]
    assert (
        "Parties" not in after[0] and "role-counts" not in after[0] and "waiting_for" not in after[0].split("<table")[0]
    )
    assert next(csv.reader(io.StringIO(after[3].lstrip("\ufeff")))) == list(CSV_COLUMNS)


def test_a_two_party_batch_runs_as_many_queries_for_3_rows_as_for_30(client, auth, users):
    auth.login()
    small = make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id, rows=ROWS[:3], name="Small")
    big = make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id, rows=ROWS * 5, name="Big")
    for url in ("/batches/{id}", "/batches/{id}/progress?shown={first}", "/batches/{id}/requests?waiting_for=employer"):
        counts = []
        for batch_id in (small, big):
            first = db.session.scalar(select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).limit(1))
            _fresh_request_state()
            with QueryCounter(db.engine) as counter:
                assert client.get(url.format(id=batch_id, first=first)).status_code == 200
            counts.append(counter.count)
        assert counts[0] == counts[1], url


def test_russian_staff_read_the_parties_in_russian(client, auth, users, batch_id):
    users["staff"].locale = "ru"
    db.session.commit()
    auth.login()
    _fresh_request_state()
    html = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    rows = _rows(html)
    emails = _emails(batch_id)
    assert "Получатель подписал · Работодатель приглашён" in rows[emails[2]]
    assert "Получатель приглашён · Работодатель ждёт своей очереди" in rows[emails[0]]
    assert (
        "Получатель: подписали 3 из 6" in html
        and "Работодатель: подписали 1 из 6" in html
        and "ожидают подписи: Работодатель" in html
    )
    assert "<th>Стороны</th>" in html


def test_the_api_lists_and_exports_the_requests_waiting_for_a_role(client, users, batch_id):
    from bulksign.people.users import create_api_key

    secret = create_api_key(db.session, user=users["staff"], name="integration", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {secret}"}
    emails = _emails(batch_id)
    listed = client.get(f"/api/v1/batches/{batch_id}/requests?waiting_for=employer", headers=headers).json
    assert [r["email"] for r in listed["items"]] == emails[:3]
    exported = client.get(f"/api/v1/batches/{batch_id}/export.csv?waiting_for=recipient", headers=headers)
    assert [r["email"] for r in csv.DictReader(io.StringIO(exported.get_data(as_text=True).lstrip("\ufeff")))] == (
        emails[:2]
    )
    assert client.get(f"/api/v1/batches/{batch_id}/requests?waiting_for=Bad!", headers=headers).status_code == 400


def test_the_openapi_description_documents_waiting_for_and_the_party_columns(client):
    spec = client.get("/api/v1/openapi.json").json
    listing = spec["paths"]["/batches/{batch_id}/requests"]["get"]
    (waiting_for,) = [p for p in listing["parameters"] if p["name"] == "waiting_for"]
    assert "has not signed yet" in waiting_for["description"]
    export = spec["paths"]["/batches/{batch_id}/export.csv"]["get"]
    assert "`<role>_status`" in export["description"] and "`<role>_opened_at`" in export["description"]


@pytest.mark.slow(seconds=30)
def test_at_100000_requests_the_roles_probe_reads_a_few_index_pages_and_the_page_counts_each_role(client, auth, users):
    from bulksign.batches import counts as batch_counts

    batch_id = make_batch(now=NOW, user=users["staff"], recipients=0)
    db.session.execute(
        text(
            "INSERT INTO signing_requests (batch_id, row_number, email, name, data, status, status_changed_at,"
            " created_at, attempts, reminder_count)"
            " SELECT :batch, n + 1, 'person' || n || '@example.com', 'Person ' || n, '{}', 'sent', :now, :now, 0, 0"
            " FROM generate_series(1, 100000) AS n"
        ),
        {"batch": batch_id, "now": NOW},
    )
    # The employer signed every third request; the recipient all of them but the tenth.
    for role, step, signed in (("recipient", 0, "id % 10 <> 0"), ("employer", 1, "id % 3 = 0")):
        db.session.execute(
            text(
                "INSERT INTO parties (request_id, batch_id, role, step, status, status_changed_at, reminder_count,"
                f" created_at) SELECT id, batch_id, :role, :step, CASE WHEN {signed} THEN 'signed' ELSE 'invited' END,"
                " :now, 0, :now FROM signing_requests WHERE batch_id = :batch"
            ),
            {"batch": batch_id, "role": role, "step": step, "now": NOW},
        )
    batch_counts.rebuild(db.session, batch_ids=[batch_id])
    db.session.commit()
    found = party_progress.batch_parties(db.session, batch_id=batch_id)
    assert [(c.role, c.signed, c.total) for c in found.counts] == [
        ("recipient", 90_000, 100_000),
        ("employer", 33_333, 100_000),
    ]
    # The roles' probe skips from role to role on the index: a few pages, not 200,000 parties.
    statements = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        statements.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", keep)
    try:
        party_progress.batch_roles(db.session, batch_id=batch_id)
    finally:
        event.remove(db.engine, "before_cursor_execute", keep)
    ((statement, parameters),) = statements
    plan = "\n".join(
        row[0] for row in db.session.connection().exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters)
    )
    assert "ix_parties_batch_role_status" in plan and "Seq Scan" not in plan, plan
    pages = re.search(r"Buffers: shared ([^\n]+)", plan)[1]
    assert sum(int(n) for n in re.findall(r"=(\d+)", pages)) < 50, plan
    auth.login()
    html = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert ">Employer: 33,333 of 100,000 signed<" in html
    waiting = client.get(f"/batches/{batch_id}/requests?waiting_for=employer").get_data(as_text=True)
    assert 'data-matching="66667"' in waiting
