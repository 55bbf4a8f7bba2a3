"""A template's sample row: made up from its columns until staff save one, bounded when saved, and the template
check's warning for each column the template uses that the sample leaves empty or lacks."""

from __future__ import annotations

from bulksign.core.extensions import db
from bulksign.doc_templates.template_check import check_template
from bulksign.doc_templates.template_sample import (
    MAX_SAMPLE_CHARS,
    default_sample,
    sample_columns,
    save_sample,
    template_sample,
)
from bulksign.doc_templates.versions import create_template
from tests.support.clock import NOW

CONTRACT = (
    "<p>{{ name }} earns {{ salary|money }} from {{ start|date }} in {{ city }}.</p>"
    "<p>IBAN {{ field_iban }}</p><p>{{ signature }}</p>"
)


def test_a_template_without_a_saved_sample_gets_one_from_its_columns(app, users):
    saved = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW)
    version = saved.version
    # The field's prefill column is the signer's to fill, and marks are no columns.
    assert sample_columns(version) == ["city", "name", "salary", "start"]
    assert default_sample(version) == {
        "city": "[city]",
        "name": "Jane Example",
        "salary": "1000",
        "start": "2026-01-31",
    }
    assert template_sample(saved.template, version) == default_sample(version)
    assert not [w for w in check_template(version, language="en").warnings if "sample row" in str(w)]


def test_a_saved_sample_is_bounded_and_the_check_names_each_column_it_leaves_empty(app, users):
    saved = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW)
    kept = save_sample(
        db.session, template=saved.template, sample={"name": "x" * 900, "city": "  ", "salary": "{{ 7*7 }}", " ": "y"}
    )
    assert kept == {"name": "x" * MAX_SAMPLE_CHARS, "city": "  ", "salary": "{{ 7*7 }}"}
    assert template_sample(saved.template, saved.version) == kept
    warnings = [str(w) for w in check_template(saved.version, language="en").warnings]
    assert [w for w in warnings if "sample row" in w] == [
        "The sample row has no value for the column “city”, which the template uses: the preview shows it empty. "
        "Fill it in under “Sample row”.",
        "The sample row has no value for the column “start”, which the template uses: the preview shows it empty. "
        "Fill it in under “Sample row”.",
    ]
    assert not check_template(saved.version, language="en").errors  # a warning: sending is not stopped
