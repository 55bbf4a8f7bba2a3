"""What the Word check makes of each tag, without printing: a party's signature, a field and its party, a row's
value, or not understood with the tag meant."""

from __future__ import annotations

import pytest

from bulksign.doc_templates.word_tags import Problem, TagKind, TagReader, classify


def _read(*tags: str) -> TagReader:
    reader = TagReader()
    reader("<w:p>" + "".join(f"<w:t>{t}</w:t>" for t in tags) + "</w:p>")
    return reader


def _one(tag: str, *, sample: dict[str, str] | None = None, parties=("recipient", "employer")):
    (found,) = classify(_read(tag), parties=list(parties), fields={}, sample=sample or {})
    return found


@pytest.mark.parametrize(
    "tag, kind, party",
    [
        ("{{ signature }}", TagKind.SIGNATURE, "recipient"),
        ("{{ signature_employer }}", TagKind.SIGNATURE, "employer"),
        ("{{ field_iban }}", TagKind.FIELD, "recipient"),
        ("{{ field_signed_date_employer }}", TagKind.FIELD, "employer"),
        ("{{ name }}", TagKind.VALUE, ""),
        ("{{ name|upper }}", TagKind.VALUE, ""),
    ],
)
def test_understood_tags_and_whose_they_are(tag, kind, party):
    found = _one(tag)
    assert (found.kind, found.party) == (kind, party)


@pytest.mark.parametrize(
    "tag, problem, meant",
    [
        ("{{ Signature }}", Problem.MISSPELT, "signature"),
        ("{{ signatur_employer }}", Problem.MISSPELT, "signature_employer"),
        ("{{ Field_iban }}", Problem.MISSPELT, "field_iban"),
        ("{{ Name }}", Problem.MISSPELT, "name"),
        ("{{ signature employer }}", Problem.UNREADABLE, "signature_employer"),
        ("{{ contract number }}", Problem.UNREADABLE, "contract_number"),
        ("{{ &lt;b&gt;name&lt;/b&gt; }}", Problem.UNREADABLE, ""),
        ("{{ 'x'|safe }}", Problem.UNREADABLE, ""),
        ("{{ " + "a" * 300 + " }}", Problem.TOO_LONG, ""),
        ("{{ contract_no }}", Problem.NOT_IN_SAMPLE, "contract_number"),
    ],
)
def test_tags_not_understood_name_the_tag_meant(tag, problem, meant):
    found = _one(tag, sample={"contract_number": "A-17"})
    assert (found.kind, found.problem, found.meant) == (TagKind.UNKNOWN, problem, meant)


def test_an_unreadable_tag_is_written_as_a_name_of_its_own_so_the_pages_still_print():
    reader = TagReader()
    patched = reader("<w:t>{{ signature employer }} and {{ name }} and {{ signature employer }}</w:t>")
    assert patched == "<w:t>{{ bulksign_unread_0 }} and {{ name }} and {{ bulksign_unread_0 }}</w:t>"
    assert reader.names == ["bulksign_unread_0", "name"]
    assert reader.unread == {"bulksign_unread_0": " signature employer "}


def test_loop_variables_are_not_columns():
    reader = _read("{% for item in items %}{{ item.price }}{% endfor %}")
    assert reader.names == ["items"]
