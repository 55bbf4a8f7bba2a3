"""Chinese, Japanese and Korean typed into a field or as the signer's name print in their own letters in the sealed
PDF and its audit certificate, each glyph drawn from a font that has it (a font without one prints an empty box
whose text still extracts); a character none of the embedded fonts has (an emoji) is refused where it is typed.
Through the real sign, the seal worker, poppler's pdftotext and the PDF's own embedded fonts."""

from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest

from bulksign.documents.storage import get_storage
from bulksign.models import utcnow
from bulksign.signing.field_entry import FilledForm, Upload, check_entries
from bulksign.signing.signer_input import InvalidInput, clean_name
from tests.signing.test_field_entry import CONTRACT, FIELDS, GOOD, a_png, sign_filled
from tests.support.looks import ARTIFACTS
from tests.support.pdf_glyphs import printed_glyphs
from tests.support.sealed import signed_document
from tests.support.signing_requests import fresh, make_sent_request

TYPED = {k.removeprefix("field-"): v for k, v in GOOD.items()}
#: A note in Chinese, Japanese (kana and kanji) and Korean, and a Chinese name.
NOTE = "东京都港区六本木 カタカナ ひらがな 서울특별시 강남구"
NAME = "王小明"


def _filled(note: str) -> FilledForm:
    return FilledForm(
        typed={**TYPED, "note": note},
        files={"id_scan": Upload(filename="scan.png", data=a_png())},
        attachment_max_bytes=10**6,
        storage=get_storage(),
    )


def _text(path) -> str:
    out = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, timeout=30).stdout
    return "".join(out.split())


def test_cjk_values_and_names_are_sealed_in_their_letters_with_a_glyph_for_each(app, users, run_jobs, tmp_path):
    r = make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"], html=CONTRACT, fields=FIELDS)
    assert sign_filled(r.id, _filled(NOTE), name=NAME) == "signed"
    run_jobs("pdf", "mail")
    sealed = get_storage().get(signed_document(r.id).storage_key)
    path = tmp_path / "sealed.pdf"
    path.write_bytes(sealed)
    pages = int(
        next(
            line.split()[-1]
            for line in subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True).stdout.splitlines()
            if line.startswith("Pages:")
        )
    )
    document, certificate = tmp_path / "document.pdf", tmp_path / "certificate.pdf"
    subprocess.run(["pdfseparate", "-f", "1", "-l", "1", str(path), str(document)], check=True)
    subprocess.run(["pdfseparate", "-f", str(pages), "-l", str(pages), str(path), str(certificate)], check=True)
    # Stamped in its box and signed in the block on the document's page, listed on the certificate.
    for part in (document, certificate):
        text = _text(part)
        assert all(word in text for word in NOTE.split()) and NAME in text, text
    # Every one of those letters is drawn with a real glyph of an embedded font, in every font that maps it.
    glyphs = printed_glyphs(sealed)
    drawn = {char: glyphs.get(char) for char in set(NOTE + NAME) - {" "}}
    assert drawn == dict.fromkeys(drawn, {True}), {c: g for c, g in drawn.items() if g != {True}}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-singlefile", str(document), str(ARTIFACTS / "sealed-cjk-page")], check=True
    )
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-singlefile", str(certificate), str(ARTIFACTS / "sealed-cjk-certificate")],
        check=True,
    )


def test_an_emoji_no_embedded_font_has_is_refused_at_its_field_and_in_the_name(app, users):
    r = make_sent_request(now=utcnow(), owner=users["staff"], html=CONTRACT, fields=FIELDS)
    checked = check_entries(fresh(r.id), role="recipient", filled=_filled("Party 🎉 time 👍"))
    assert checked.errors["note"].english == (
        "“Note” has characters the signed document cannot print: 🎉 👍. Write it without them."
    )
    with app.test_request_context("/"), pytest.raises(InvalidInput) as refused:
        clean_name("Anna 🎉")
    assert str(refused.value) == "The name has characters the signed document cannot print: 🎉."
    assert clean_name("Anna 王") == "Anna 王"
