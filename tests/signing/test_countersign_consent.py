"""The countersigner signs exactly what their page showed: "Sign all" after a search signs the documents found,
never a document that became ready after the page was shown, and a run whose listed documents changed is refused
with the reason — on real workers, real mail (aiosmtpd), real PDFs."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from bulksign.core.extensions import db
from bulksign.models import CountersignRun, Party
from bulksign.signing import countersign_listed
from tests.signing.test_countersign import _party, _ready, _recipient_signs, shown_form
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from

SIGNATURE = {"name": "Anna Boss", "consent": "yes", "signature": data_url(png())}


def _sign_as_shown(client, page, **fields):
    """Submit the page's own sign form as a browser would: its hidden fields as the page gave them."""
    token = re.search(r'action="/countersign/([^/"]+)/sign"', page.get_data(as_text=True)).group(1)
    return client.post(f"/countersign/{token}/sign", data={**shown_form(page), "all": "1", **SIGNATURE, **fields})


def _statuses(ids: list[int]) -> list[str]:
    return [_party(i).status for i in ids]


def _before_button(page) -> str:
    return page.get_data(as_text=True).split('id="sign-button"', 1)[0].rsplit('id="sign-form"', 1)[1]


def test_sign_all_after_a_search_signs_only_the_documents_found(app, users, client, smtp, run_jobs):
    ids, token = _ready(users, client, smtp, run_jobs, signed=3)
    page = client.get(f"/countersign/{token}?q=employee+2")
    shown = _before_button(page)
    assert "All 1 document that match the search" in shown
    assert "“All” signs exactly 1 document: the one listed now." in shown  # said before the button

    started = _sign_as_shown(client, page)
    assert started.status_code == 303
    run_jobs("default", "pdf", "mail")
    assert _statuses(ids) == ["invited", "signed", "invited"]


def test_documents_ready_after_the_page_was_shown_are_not_signed_by_its_sign_all(app, users, client, smtp, run_jobs):
    ids, token = _ready(users, client, smtp, run_jobs, signed=2)
    page = client.get(f"/countersign/{token}")
    assert "“All” signs exactly 2 documents: those listed now." in _before_button(page)
    _recipient_signs(client, smtp, ids[2])
    run_jobs("pdf", "mail")  # a third document is ready now, not on the page the countersigner read
    assert _party(ids[2]).status == "invited"

    started = _sign_as_shown(client, page)
    assert started.status_code == 303
    assert "0 of 2 done" in client.get(started.location).get_data(as_text=True)
    run_jobs("default", "pdf", "mail")
    assert _statuses(ids) == ["signed", "signed", "invited"]
    assert "All 1 document" in client.get(f"/countersign/{token}").get_data(as_text=True)


def test_a_run_whose_listed_documents_changed_is_refused_and_the_page_shows_the_list_again(
    app, users, client, smtp, run_jobs
):
    ids, token = _ready(users, client, smtp, run_jobs, signed=3)
    page = client.get(f"/countersign/{token}")
    second = _party(ids[1]).id
    reading = client.get(f"/countersign/{token}/documents/{second}")
    declined = client.post(
        f"/countersign/{token}/documents/{second}/decline", data={"csrf_token": csrf_from(reading), "reason": "No"}
    )
    assert declined.status_code == 303

    refused = _sign_as_shown(client, page)
    assert refused.status_code == 409
    text = refused.get_data(as_text=True)
    assert "1 document changed since you opened the page; review the list again." in text
    assert "All 2 documents" in text  # the list as it is now
    # A ticked document that no longer waits is refused the same way.
    ticked = _sign_as_shown(client, page, all="0", party_ids=[str(_party(ids[0]).id), str(second)])
    assert ticked.status_code == 409 and "1 document changed since" in ticked.get_data(as_text=True)
    assert db.session.scalar(select(func.count()).select_from(CountersignRun)) == 0
    run_jobs("default", "pdf", "mail")
    assert _statuses(ids) == ["invited", "declined", "invited"]

    assert _sign_as_shown(client, client.get(f"/countersign/{token}")).status_code == 303
    run_jobs("default", "pdf", "mail")
    assert _statuses(ids) == ["signed", "declined", "signed"]


def test_a_long_list_goes_as_a_digest_of_its_documents_and_any_change_refuses_the_run(
    app, users, client, smtp, run_jobs, monkeypatch
):
    monkeypatch.setattr(countersign_listed, "LISTED_IDS_MAX", 1)  # two documents make a long list here
    ids, token = _ready(users, client, smtp, run_jobs, signed=2)
    page = client.get(f"/countersign/{token}")
    shown = _before_button(page)
    assert "“All” signs exactly 2 documents: those listed now." in shown
    assert not any(f'value="{_party(i).id}' in shown for i in ids)  # no ids: their digest and count
    _recipient_signs(client, smtp, ids[2])
    run_jobs("pdf", "mail")

    refused = _sign_as_shown(client, page)
    assert refused.status_code == 409
    assert "The documents waiting for you changed since you opened the page; review the list again." in (
        refused.get_data(as_text=True)
    )
    run_jobs("default", "pdf", "mail")
    assert _statuses(ids) == ["invited", "invited", "invited"]
    # A made-up digest of the same count is no consent either.
    forged = _sign_as_shown(client, client.get(f"/countersign/{token}"), listed="sha256:" + "0" * 64 + ":3")
    assert forged.status_code == 409

    assert _sign_as_shown(client, client.get(f"/countersign/{token}")).status_code == 303
    run_jobs("default", "pdf", "mail")
    assert _statuses(ids) == ["signed", "signed", "signed"]
    assert db.session.scalar(select(func.count()).where(Party.role == "employer", Party.status == "signed")) == 3
