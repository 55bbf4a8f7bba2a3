"""The new-batch form: the canonical time zones by region, the organisation's zone and the
staff member's language first, and a hint that says which columns the chosen template needs (loose end a)."""

from __future__ import annotations

import re

import pytest
from flask import g

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from tests.support.clock import NOW


def _template(users, name: str, html: str) -> int:
    saved = create_template(db.session, name=name, html=html, user=users["staff"], now=NOW)
    db.session.commit()
    return saved.template.id


def _zone_picker(html: str) -> str:
    return re.search(r'<select name="timezone" id="timezone">(.*?)</select>', html, re.S).group(1)


def _selected(picker: str) -> str:
    return re.search(r'<option value="([^"]+)" selected>', picker).group(1)


@pytest.fixture
def form_page(client, auth, users):
    _template(users, "Contract", "<p>{{ name }}: {{ position }}</p>{% if bonus %}{{ bonus }}{% endif %}")

    def get(locale: str = "en") -> str:
        users["staff"].locale = locale
        db.session.commit()
        auth.login()
        # The test shares the client's app context: Flask-Babel caches the login page's locale on g.
        g.pop("_login_user", None)
        g.pop("_flask_babel", None)
        page = client.get("/batches/new").get_data(as_text=True)
        auth.logout()
        return page

    return get


def test_the_time_zones_are_the_canonical_ones_by_region_with_utc_first(form_page, app):
    picker = _zone_picker(form_page())
    zones = re.findall(r'<option value="([^"]+)"', picker)
    assert zones[0] == "UTC" and _selected(picker) == "UTC"
    assert len(zones) == len(set(zones)) and 380 < len(zones) < 460, len(zones)
    # The zones people live in, one name each: no backward aliases, offsets or duplicates.
    assert {"Europe/Berlin", "Europe/Kyiv", "Asia/Kolkata", "America/New_York", "Europe/Amsterdam"} <= set(zones)
    assert not {"US/Eastern", "Asia/Calcutta", "Europe/Kiev", "Etc/GMT+3", "GB", "Europe/Belfast"} & set(zones)
    groups = re.findall(r'<optgroup label="([^"]+)">', picker)
    assert groups[:3] == ["Europe", "America", "Asia"] and "Indian Ocean" in groups
    assert '<option value="Europe/Berlin">Berlin</option>' in picker


@pytest.mark.parametrize(
    ("setting", "chosen"), [("Europe/Berlin", "Europe/Berlin"), ("US/Eastern", "America/New_York")]
)
def test_the_organisations_zone_is_chosen_first(form_page, app, setting, chosen):
    app.config["ORG_TIMEZONE"] = setting
    assert _selected(_zone_picker(form_page())) == chosen


@pytest.mark.parametrize(
    ("locale", "language", "city", "region"), [("en", "en", "Moscow", "Europe"), ("ru", "ru", "Москва", "Европа")]
)
def test_the_recipients_language_is_the_staff_members_and_cities_read_in_it(form_page, locale, language, city, region):
    page = form_page(locale)
    assert re.search(rf'<option value="{language}" selected>', page)
    picker = _zone_picker(page)
    assert f'<option value="Europe/Moscow">{city}</option>' in picker and f'<optgroup label="{region}">' in picker


def test_the_file_hint_names_the_columns_the_chosen_template_needs(form_page, client, auth, users):
    page = form_page()
    assert re.search(r'id="required-columns">email, name, position<', page)
    assert re.search(r'id="optional-columns">bonus<', page)
    assert '"name" and "phone" are recognised' not in page
    # Another template chosen: the picker asks for its hint.
    other = _template(users, "Notice", "<p>{% if name %}{{ name }}{% endif %} {{ city }}</p>")
    auth.login()
    hint = client.get(f"/batches/new/columns?template_id={other}").get_data(as_text=True)
    assert re.search(r'id="required-columns">email, city<', hint) and re.search(r'id="optional-columns">name<', hint)
    # A template the user may not use (or none): the general hint, not an error.
    general = client.get("/batches/new/columns?template_id=999999")
    assert general.status_code == 200 and "required-columns" not in general.get_data(as_text=True)


def test_another_address_for_the_notices_is_hidden_until_chosen_without_a_script(form_page):
    page = form_page()
    # Hidden by the style sheet while another option is chosen; no script attribute drives it.
    assert "data-picks" not in page
    css = open("static/app.css", encoding="utf-8").read()
    assert 'fieldset.notice-choice:not(:has(option[value="other"]:checked)) input[name="notify_email"]' in css


def test_an_unknown_organisation_zone_stops_the_start_with_the_reason(make_app):
    from bulksign.core.config import ConfigError

    with pytest.raises(ConfigError, match="ORG_TIMEZONE must be an IANA time zone"):
        make_app(ORG_TIMEZONE="Mars/Olympus")
