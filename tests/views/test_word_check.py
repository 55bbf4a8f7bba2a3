"""The Word check, through its pages and a real worker with LibreOffice: the tags to copy, a .docx printed with a
sample row, each tag's place framed in its party's colour, what is not understood named with the tag meant, the
sample row edited, and hostile files answered in words, never with a 500."""

from __future__ import annotations

import io
import re

import pytest
from docx import Document

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template, get_version
from bulksign.models import WordCheck
from tests.support import docx_files
from tests.support.accounts import ADMIN
from tests.support.clock import NOW
from tests.support.hostile_docx import with_parts
from tests.support.web import csrf_from

pytestmark = pytest.mark.slow


def _docx(*paragraphs: str) -> bytes:
    document = Document()
    for text in paragraphs:
        document.add_paragraph(text)
    return docx_files.save(document)


def _work(run_jobs) -> None:
    """The check's job run by a real worker; the test shares the client's app context, whose user the worker's
    session ending left detached: the next request loads it again."""
    from flask import g

    run_jobs("pdf")
    g.pop("_login_user", None)


def _check(client, run_jobs, data: bytes, url: str = "/templates/word-check") -> tuple[WordCheck, str]:
    """Upload ``data`` for a check, run its job, and read the check's page as it polls it."""
    page = client.get(url)
    assert page.status_code == 200
    started = client.post(url, data={"csrf_token": csrf_from(page), "file": (io.BytesIO(data), "contract.docx")})
    assert started.status_code == 302, started.get_data(as_text=True)
    waiting = client.get(started.headers["Location"]).get_data(as_text=True)
    assert 'id="word-check-running"' in waiting and 'hx-trigger="every 1s"' in waiting
    _work(run_jobs)
    check = db.session.scalars(db.select(WordCheck).order_by(WordCheck.id.desc())).first()
    db.session.refresh(check)
    outcome = client.get(f"/templates/word-checks/{check.id}/status")
    assert outcome.status_code == 200
    text = outcome.get_data(as_text=True)
    assert "hx-trigger" not in text  # done: the page stops polling
    return check, text


def _boxes(text: str) -> dict[str, str]:
    """Each framed tag on the sample pages → its colour."""
    return dict(re.findall(r'data-tag="([^"]+)"[^>]*style="--party: (#[0-9a-f]{6})', text))


def test_a_good_tag_is_found_and_framed_and_a_misspelt_one_is_named_with_the_tag_meant(client, auth, run_jobs):
    auth.login()
    data = _docx(
        "Dear {{ name }}, contract {{ contract_no }}.",
        "Employee: {{ Signature }}",
        "{{ signature }}",
        "Employer: {{ signature employer }}",
        "{{ signature_employer }}",
    )
    check, text = _check(client, run_jobs, data)
    assert check.status == "ready"
    found = text[text.index('id="word-check-found"') : text.index('id="word-check-unknown"')]
    unknown = text[text.index('id="word-check-unknown"') : text.index('id="word-check-sample"')]
    for tag in ("{{ name }}", "{{ contract_no }}", "{{ signature }}", "{{ signature_employer }}"):
        assert tag in found
    assert "Signature: Recipient" in found and "Signature: Employer" in found
    assert "{{ Signature }}" in unknown and "Did you mean <code>{{ signature }}</code>" in unknown
    assert "{{ signature employer }}" in unknown and "Did you mean <code>{{ signature_employer }}</code>" in unknown
    boxes = _boxes(text)
    # Each signature in its party's colour, the values neutral, what is not understood in red, all on page 1.
    assert boxes["signature"] == "#1f6feb" and boxes["signature_employer"] == "#b35900"
    assert boxes["name"] == boxes["contract_no"] == "#57606a"
    assert boxes["Signature"] == "#cf222e"
    places = check.result["places"]
    assert places["signature"][0]["page"] == 1 and places["name"][0]["top"] < places["signature"][0]["top"]
    image = client.get(f"/templates/word-checks/{check.id}/pages/1.png?w=800")
    assert image.status_code == 200 and image.data.startswith(b"\x89PNG")
    assert client.get(f"/templates/word-checks/{check.id}/pages/2.png?w=800").status_code == 404


def test_the_sample_row_is_edited_on_the_page_and_a_column_it_lacks_is_named(client, auth, run_jobs):
    auth.login()
    check, text = _check(client, run_jobs, _docx("Contract {{ contract_no }} in {{ city }}."))
    first = check.id
    assert check.sample == {"contract_no": "[contract_no]", "city": "[city]"}
    page = client.get(f"/templates/word-checks/{first}")
    again = client.post(
        f"/templates/word-checks/{first}/again",
        data={
            "csrf_token": csrf_from(page),
            "sample-column": ["contract_no", "city", "contract_number", ""],
            "sample-value": ["", "Paris", "A-17", ""],
        },
    )
    assert again.status_code == 302
    _work(run_jobs)
    fresh = db.session.scalars(db.select(WordCheck).order_by(WordCheck.id.desc())).first()
    db.session.refresh(fresh)
    assert fresh.id != first and fresh.sample == {"contract_no": "", "city": "Paris", "contract_number": "A-17"}
    text = client.get(f"/templates/word-checks/{fresh.id}").get_data(as_text=True)
    unknown = text[text.index('id="word-check-unknown"') : text.index('id="word-check-sample"')]
    assert "{{ contract_no }}" in unknown and "A column no sample row has" in unknown
    assert "Did you mean <code>{{ contract_number }}</code>" in unknown
    assert "A value of the row: Paris" in text


def test_a_templates_own_parties_colour_its_tags_and_another_user_sees_none_of_its_checks(
    app, client, auth, users, run_jobs
):
    data = _docx(
        "{{ name }}", "{{ signature }}", "{{ signature_employer }}", "Signed on {{ field_signed_date_employer }}"
    )
    template = create_template(
        db.session, name="Contract", html="", kind="docx", file=data, user=users["staff"], now=NOW
    ).template
    db.session.commit()
    template_id = template.id
    version = get_version(db.session, template_id=template_id)
    # The palette's names for the date a party signed are read as that field on save.
    assert [(f["name"], f["type"], f["role"]) for f in version.fields] == [
        ("signed_date_employer", "signed_date", "employer")
    ]
    auth.login()
    detail = client.get(f"/templates/{template_id}").get_data(as_text=True)
    assert f'href="/templates/{template_id}/word-check"' in detail
    tags = detail[detail.index('id="word-tags"') :]
    assert 'data-copy="{{ field_signed_date_employer }}"' in tags and "Signature: Employer" in tags
    form = client.get(f"/templates/{template_id}/word-check")
    start = form.get_data(as_text=True)
    assert "{{ signature_employer }}" in start and "{{ field_signed_date_employer }}" in start
    assert 'data-copy="{{ signature_employer }}"' in start
    started = client.post(f"/templates/{template_id}/word-check", data={"csrf_token": csrf_from(form)})
    assert started.status_code == 302
    _work(run_jobs)
    check = db.session.scalars(db.select(WordCheck)).one()
    db.session.refresh(check)
    check_id = check.id
    assert check.status == "ready" and check.template_id == template_id
    text = client.get(f"/templates/word-checks/{check_id}").get_data(as_text=True)
    assert "Date signed: Employer" in text and 'id="word-check-all-understood"' in text
    assert _boxes(text)["field_signed_date_employer"] == "#b35900"
    auth.logout()
    auth.login(*ADMIN)
    assert client.get(f"/templates/word-checks/{check_id}").status_code == 404
    assert client.get(f"/templates/word-checks/{check_id}/status").status_code == 404
    assert client.get(f"/templates/word-checks/{check_id}/pages/1.png").status_code == 404


@pytest.mark.parametrize(
    "data, said",
    [
        (b"PK\x03\x04 not a zip at all", "broken"),
        (with_parts({"word/document.xml": b"<w:document"}, docx_files.simple()), "cannot be read"),
        (_docx("{{ " + "a" * 5000 + " }}"), "Longer than 200 characters"),
        (_docx("Hello {{ <script>alert(1)</script> }}"), "Not a tag the document can use"),
        (_docx("{% if x %}never closed"), "could not be checked"),
    ],
    ids=["not-a-zip", "broken-xml", "huge-tag", "html-in-tag", "unclosed-block"],
)
def test_hostile_files_are_answered_in_words(client, auth, run_jobs, data, said):
    auth.login()
    check, text = _check(client, run_jobs, data)
    assert said in text, text
    assert "<script>alert" not in text
    assert (check.status == "failed") == ('id="word-check-failed"' in text)


def test_an_empty_upload_is_refused_on_the_form(client, auth):
    auth.login()
    page = client.get("/templates/word-check")
    assert 'id="word-palette"' in page.get_data(as_text=True)
    refused = client.post("/templates/word-check", data={"csrf_token": csrf_from(page)})
    assert refused.status_code == 422 and "Choose the Word file to check." in refused.get_data(as_text=True)
    empty = client.post(
        "/templates/word-check", data={"csrf_token": csrf_from(page), "file": (io.BytesIO(b""), "x.docx")}
    )
    assert empty.status_code == 422 and "The uploaded file is empty." in empty.get_data(as_text=True)


def test_the_word_template_form_offers_the_tags_to_copy(client, auth):
    auth.login()
    text = client.get("/templates/new").get_data(as_text=True)
    tags = text[text.index('id="word-tags"') :]
    assert 'data-copy="{{ signature }}"' in tags and 'data-copy="{{ name }}"' in tags
    assert 'href="/templates/word-check"' in tags


def test_a_sample_a_test_in_the_file_cannot_take_fails_in_words_and_stays_editable(client, auth, run_jobs):
    auth.login()
    check, text = _check(client, run_jobs, _docx("{% if children > 0 %}Allowance for {{ children }}.{% endif %}"))
    assert check.status == "failed" and "calculates with text as if it were a number" in text
    assert 'id="word-check-sample"' in text and 'value="children"' in text


def test_a_check_no_worker_finished_is_given_up_in_words(client, auth, users):
    from datetime import timedelta

    from bulksign.models import utcnow

    auth.login()
    check = WordCheck(
        source_key="word-checks/none.docx",
        sample={},
        status="running",
        created_by_id=users["staff"].id,
        created_at=utcnow() - timedelta(minutes=11),
    )
    db.session.add(check)
    db.session.commit()
    text = client.get(f"/templates/word-checks/{check.id}/status").get_data(as_text=True)
    assert "The check did not finish" in text and "hx-trigger" not in text


def test_one_person_has_at_most_three_checks_under_way(client, auth):
    auth.login()
    page = client.get("/templates/word-check")
    for n in range(4):
        started = client.post(
            "/templates/word-check",
            data={"csrf_token": csrf_from(page), "file": (io.BytesIO(_docx(f"Version {n} {{{{ name }}}}")), "a.docx")},
        )
        assert started.status_code == (302 if n < 3 else 422)
    assert "3 of your checks are still being printed" in started.get_data(as_text=True)


def test_checks_go_with_their_files_as_a_recipients_file_no_batch_was_made_of(app, users):
    from datetime import timedelta

    from bulksign.doc_templates.word_check import expire_checks
    from bulksign.documents.pdf_pages import page_key
    from bulksign.documents.storage import get_storage

    storage = get_storage()
    for key in (
        "word-checks/a.docx",
        "word-checks/b.docx",
        "word-checks/a.pdf",
        page_key("word-checks/a.pdf", page=0, width=800),
    ):
        storage.put(key, b"x")
    storage.put("templates/1/t.docx", b"x")

    def check(source: str, pdf: str | None, age_hours: int) -> None:
        db.session.add(
            WordCheck(
                source_key=source,
                pdf_key=pdf,
                sample={},
                status="ready",
                result={"pages": [[612, 792]]} if pdf else None,
                created_by_id=users["staff"].id,
                created_at=NOW - timedelta(hours=age_hours),
            )
        )

    check("word-checks/a.docx", "word-checks/a.pdf", 30)
    check("templates/1/t.docx", None, 30)  # a saved template's own file
    check("word-checks/b.docx", None, 30)
    check("word-checks/b.docx", None, 1)  # the same file checked again since
    db.session.commit()
    assert expire_checks(db.session, storage, now=NOW, hours=24) == 3
    db.session.commit()
    assert [c.created_at for c in db.session.scalars(db.select(WordCheck))] == [NOW - timedelta(hours=1)]
    assert not storage.exists("word-checks/a.docx") and not storage.exists("word-checks/a.pdf")
    assert not storage.exists(page_key("word-checks/a.pdf", page=0, width=800))
    assert storage.exists("word-checks/b.docx") and storage.exists("templates/1/t.docx")
