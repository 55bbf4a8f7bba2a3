"""A try the signing page refuses comes back with everything the signer gave (the drawing included) and marks the
input to correct, naming it in the message at the top."""

from __future__ import annotations

import html as markup
import re

from tests.signing.test_field_entry import GOOD, a_png, contract, post
from tests.support.signatures import data_url, png
from tests.support.signing_requests import fresh


def _kept_signature(page: str) -> str:
    return markup.unescape(re.search(r'name="signature" id="signature" value="([^"]*)"', page).group(1))


def test_a_field_error_keeps_the_drawing_and_names_the_fields_to_correct(client, users):
    r = contract(users)
    drawing = data_url(png())
    typed = {**GOOD, "field-iban": "", "field-start": "2026-02-30", "signature": drawing}
    answer = post(client, r.token, typed, {"field-id_scan": ("scan.png", a_png())})
    page = answer.get_data(as_text=True)
    assert answer.status_code == 422
    assert (
        "Correct these fields, each has a message: “IBAN”, “Start date”. Everything else you gave is kept."
        in markup.unescape(page)
    )
    assert _kept_signature(page) == drawing and 'id="pad-kept"' in page
    assert 'value="Иван Петров"' in page and fresh(r.id).status == "opened"


def test_the_name_and_the_consent_are_marked_where_they_are_refused(client, users):
    r = contract(users)
    drawing = data_url(png())
    no_consent = post(
        client, r.token, {**GOOD, "consent": "", "signature": drawing}, {"field-id_scan": ("s.png", a_png())}
    )
    page = no_consent.get_data(as_text=True)
    assert 'aria-invalid="true" aria-describedby="consent-error"' in page
    assert 'id="consent-error">Tick “I agree to sign electronically” to sign.</p>' in markup.unescape(page)
    assert _kept_signature(page) == drawing
    no_name = post(
        client, r.token, {**GOOD, "name": "\u200b ", "signature": drawing}, {"field-id_scan": ("s.png", a_png())}
    )
    page = no_name.get_data(as_text=True)
    assert 'aria-invalid="true" aria-describedby="name-error" autofocus' in page
    assert 'id="name-error">Type your full name to sign.</p>' in page and _kept_signature(page) == drawing


def test_a_drawing_that_is_not_a_picture_is_not_sent_back_and_its_pad_is_marked(client, users):
    r = contract(users)
    for forged in ("data:image/png;base64,AAAA", "javascript:alert(1)", 'data:image/png;base64,"><script>'):
        answer = post(client, r.token, {**GOOD, "signature": forged}, {"field-id_scan": ("s.png", a_png())})
        page = answer.get_data(as_text=True)
        assert 'class="pad-box field-wrong"' in page and 'id="signature-error"' in page, forged
        assert _kept_signature(page) == "" and '"><script>' not in page and "javascript:" not in page
