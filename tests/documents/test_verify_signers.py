"""/verify names every party who signed (role, name, time) and, for a copy whose people were purged, says in a full
sentence that the names were removed under the retention rules."""

from __future__ import annotations

import io
import re

import pytest

from bulksign.batches.retention.purge import purge_requests
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Document, utcnow
from tests.signing.test_routing import _mails_to, _sent, _sign, _token
from tests.support.sealed import signed_document, signed_request, upload


def _shown(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_a_two_party_contract_names_both_signers_with_their_roles(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs)
    _sign(client, _token(smtp.received[0]), "Eva Employee")
    run_jobs("pdf", "mail")
    _sign(client, _token(_mails_to(smtp, "hr@acme.example")[0]), "Anna Boss")
    run_jobs("pdf", "mail")
    data = get_storage().get(signed_document(request_id).storage_key)
    shown = _shown(upload(client, data).get_data(as_text=True))
    assert "“Employment contract”, signed on" in shown
    assert re.search(r"Recipient: Eva Employee, \d{4}-\d\d-\d\d \d\d:\d\d UTC Employer: Anna Boss, \d{4}-", shown), (
        shown
    )


@pytest.mark.parametrize(
    "language, sentence",
    [
        ("en", "The signers' names were removed under the retention rules; the record of the signing is kept."),
        ("ru", "Имена подписавших удалены по правилам хранения; запись о подписании сохранена."),
    ],
)
def test_a_kept_copy_after_a_purge_says_the_names_were_removed(app, users, client, run_jobs, language, sentence):
    r = signed_request(owner=users["staff"], image=False)
    run_jobs("pdf")
    data = get_storage().get(signed_document(r.id).storage_key)
    purge_requests(db.session, storage=get_storage(), request_ids=[r.id], now=utcnow(), reason="retention")
    db.session.commit()
    assert db.session.query(Document).filter(Document.request_id == r.id).count() >= 1
    client.environ_base["HTTP_ACCEPT_LANGUAGE"] = language
    html = upload(client, data).get_data(as_text=True)
    shown = _shown(html).replace("&#39;", "'")
    assert sentence in shown and "signed by on" not in shown and 'id="signers"' not in html
    assert io.BytesIO(data).read(5) == b"%PDF-"
