"""The countersigner's pages: greeted and prefilled by the name staff gave, each document signable from its own
page, finished documents named after their person and document, and all of them in one ZIP; the drawing given once
offered again on the next documents of the session."""

from __future__ import annotations

import io
import zipfile
from urllib.parse import unquote

from sqlalchemy import select, update

from bulksign.core.extensions import db
from bulksign.models import CountersignLink, CountersignRun, SigningRequest, utcnow
from bulksign.signing.countersign import own_link
from tests.signing.test_countersign import _digests, _party, _ready, shown_form
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from


def _filename(response) -> str:
    """The download's name as a browser reads it: ``filename*`` (RFC 5987) when given, else ``filename``."""
    header = response.headers["Content-Disposition"]
    if "filename*=UTF-8''" in header:
        return unquote(header.split("filename*=UTF-8''", 1)[1])
    return header.split('filename="', 1)[1].split('"', 1)[0]


def test_greeted_by_name_signs_one_document_from_its_page_and_downloads_them_named(app, users, client, smtp, run_jobs):
    ids, token = _ready(users, client, smtp, run_jobs, signed=2)
    assert _digests(smtp)[0].text().startswith("Hello, Anna Boss,")
    page = client.get(f"/countersign/{token}").get_data(as_text=True)
    assert 'id="cs-greeting">Hello, Anna Boss.</p>' in page
    assert 'id="cs-for">Anna Boss &lt;hr@acme.example&gt;</dd>' in page
    assert 'name="name" required maxlength="300" autocomplete="name" value="Anna Boss"' in page

    # One document, from its own page: only that one is signed.
    first = _party(ids[0]).id
    document = client.get(f"/countersign/{token}/documents/{first}")
    html = document.get_data(as_text=True)
    assert 'id="sign-form"' in html and f'name="party_ids" value="{first}"' in html and 'value="Anna Boss"' in html
    signed = client.post(
        f"/countersign/{token}/sign",
        data={
            "csrf_token": csrf_from(document),
            "all": "0",
            "party_ids": str(first),
            "name": "Anna Boss",
            "consent": "yes",
            "signature": data_url(png()),
        },
    )
    assert signed.status_code == 303
    run_jobs("default", "pdf", "mail")
    db.session.expire_all()
    assert [db.session.get(SigningRequest, i).status for i in ids[:2]] == ["signed", "opened"]

    copy = client.get(f"/countersign/{token}/signed/{first}")
    assert copy.status_code == 200 and _filename(copy) == "Employee 1 – Employment contract.pdf"
    assert copy.headers["Content-Disposition"].startswith('attachment; filename="Employee 1  Employment contract.pdf";')
    # A name that is a path or a header: a harmless file name.
    db.session.execute(update(SigningRequest).where(SigningRequest.id == ids[0]).values(name='../x"\r\nSet: 1'))
    db.session.commit()
    assert _filename(client.get(f"/countersign/{token}/signed/{first}")) == "_x_Set_ 1 – Employment contract.pdf"

    page = client.get(f"/countersign/{token}").get_data(as_text=True)
    assert f'href="/countersign/{token}/signed.zip"' in page
    archive = client.get(f"/countersign/{token}/signed.zip")
    assert archive.status_code == 200 and _filename(archive) == "Employment contract.zip"
    with zipfile.ZipFile(io.BytesIO(archive.data)) as found:
        assert found.namelist() == ["_x_Set_ 1 – Employment contract.pdf"]
        assert found.read(found.namelist()[0]) == copy.data
    assert client.get(f"/countersign/{token[:-2]}zz/signed.zip").status_code == 404


def test_the_drawing_is_adopted_for_the_session_and_offered_on_the_next_documents(app, users, client, smtp, run_jobs):
    ids, token = _ready(users, client, smtp, run_jobs, signed=3)
    first, second = _party(ids[0]).id, _party(ids[1]).id
    document = client.get(f"/countersign/{token}/documents/{first}")
    assert 'id="pad-kept"' not in document.get_data(as_text=True)
    signed = client.post(
        f"/countersign/{token}/sign",
        data={
            "csrf_token": csrf_from(document),
            "all": "0",
            "party_ids": str(first),
            "name": "Anna B. Boss",
            "consent": "yes",
            "signature": data_url(png()),
        },
    )
    assert signed.status_code == 303
    drawn = db.session.scalars(select(CountersignRun.signature_image)).one()
    offered = f'id="signature" value="{data_url(drawn)}"'
    # The next document's page and the list offer the name and the drawing given, and say so.
    for url in (f"/countersign/{token}/documents/{second}", f"/countersign/{token}"):
        html = client.get(url).get_data(as_text=True)
        assert offered in html and 'value="Anna B. Boss"' in html, url
        assert "the signature you drew before is filled in; clear it to draw another" in html
    # A document opened on its own signing page (one with fields to fill) offers it too.
    link = db.session.scalars(select(CountersignLink)).one()
    own = own_link(db.session, link=link, party_id=second, secret=app.config["SECRET_KEY"], now=utcnow())
    html = client.get(f"/sign/{own}").get_data(as_text=True)
    assert offered in html and 'value="Anna B. Boss"' in html and "drew before" in html
    # Another browser with the same link is offered nothing: it draws its own.
    assert "drew before" not in app.test_client().get(f"/sign/{own}").get_data(as_text=True)
    html = app.test_client().get(f"/countersign/{token}").get_data(as_text=True)
    assert 'id="signature" value=""' in html and 'value="Anna Boss"' in html and "drew before" not in html


def test_a_refused_sign_form_comes_back_with_its_drawing(client, users, smtp, run_jobs):
    _, token = _ready(users, client, smtp, run_jobs, signed=1)
    page = client.get(f"/countersign/{token}")
    drawing = data_url(png())
    for refused_form in ({"all": "1"}, {"all": "0", "consent": "yes"}):  # no consent; nothing ticked
        refused = client.post(
            f"/countersign/{token}/sign",
            data={**shown_form(page), "name": "Anna Boss", "signature": drawing, **refused_form},
        )
        assert refused.status_code == 422
        html = refused.get_data(as_text=True)
        assert f'id="signature" value="{drawing}"' in html and "your drawing is kept" in html
