"""The organisation's look, the dashboard home, the mailbox pages, and template errors in plain words."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from bulksign.batches.home import home
from bulksign.core import branding
from bulksign.core.config import ConfigError, load_config
from bulksign.core.extensions import db
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.variables import extract_variables
from bulksign.models import Batch, SigningRequest
from bulksign.work.pipeline import enqueue_renders
from tests.support import batchdata
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW
from tests.support.web import csrf_from

# --- Brand -----------------------------------------------------------------------------------


@pytest.mark.parametrize("color", ["#2357d9", "#ffd400", "#00ff00", "#000", "#ffffff", "#e60000", "#7fdbff"])
def test_any_organisation_colour_gives_text_and_links_that_pass_wcag_aa(color):
    brand = branding.brand_from({"ORG_COLOR": color})
    assert branding.contrast(brand.on_color, brand.color) >= 4.5 or branding.contrast(
        brand.on_color, brand.color
    ) >= branding.contrast(branding.WHITE if brand.on_color == branding.INK else branding.INK, brand.color)
    assert branding.contrast(brand.text_color, branding.WHITE) >= 4.5


def test_a_light_brand_colour_gets_dark_text_on_its_buttons():
    assert branding.brand_from({"ORG_COLOR": "#FFD400"}).on_color == branding.INK
    assert branding.brand_from({"ORG_COLOR": "#123"}).color == "#112233"


@pytest.mark.parametrize(
    "setting, value, words",
    [
        ("ORG_COLOR", "blue", "ORG_COLOR must be a hex colour"),
        ("ORG_COLOR", "#12345g", "ORG_COLOR must be a hex colour"),
        ("ORG_LOGO", "/etc/passwd", "ORG_LOGO must be an http(s) URL or an image file"),
        ("ORG_LOGO", "/nowhere/logo.png", "ORG_LOGO names a file that does not exist"),
    ],
)
def test_a_malformed_brand_setting_stops_the_start_with_its_name(setting, value, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_config({setting: value})


def test_the_organisation_name_logo_and_colour_are_on_staff_and_signing_pages(make_app, users, tmp_path):
    logo = tmp_path / "acme.png"
    logo.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    app = make_app(ORG_NAME="Acme HR", ORG_LOGO=str(logo), ORG_COLOR="#C0392B")
    with app.app_context():
        client = app.test_client()
        login = client.get("/auth/login").get_data(as_text=True)
        assert "Acme HR" in login and 'src="/brand/logo"' in login and "/brand.css" in login
        css = client.get("/brand.css")
        assert css.status_code == 200 and css.mimetype == "text/css" and "--brand:#c0392b" in css.get_data(as_text=True)
        assert client.get("/brand/logo").get_data() == logo.read_bytes()
        signing = client.get("/sign/not-a-real-token")
        assert signing.status_code == 404 and "Acme HR" in signing.get_data(as_text=True)


def test_a_remote_logo_is_allowed_by_the_signing_pages_policy(make_app):
    app = make_app(ORG_LOGO="https://cdn.example.com/acme/logo.svg")
    with app.app_context():
        response = app.test_client().get("/sign/not-a-real-token")
        assert "img-src 'self' data: https://cdn.example.com;" in response.headers["Content-Security-Policy"]
        assert 'src="https://cdn.example.com/acme/logo.svg"' in response.get_data(as_text=True)


def test_invitations_carry_a_branded_html_part_with_the_same_text_and_keep_the_text_part(
    make_app, users, smtp, run_jobs
):
    app = make_app(ORG_NAME="Acme HR", ORG_COLOR="#0b7a4b")
    with app.app_context():
        batch = make_batch(user=users["staff"], now=NOW, recipients=1)
        enqueue_renders(request_ids(batch))
        run_jobs("pdf", "mail")
        (mail,) = smtp.of_kind("invitation")
        text, html = mail.text(), mail.html()
        link = re.search(r"http://127\.0\.0\.1:5000/sign/[A-Za-z0-9_-]+", text).group(0)
        assert "Hello Person 0," in text and "<" not in text
        assert "Acme HR" in html and "border-top:4px solid #0b7a4b" in html
        assert html.count(f'href="{link}"') == 2  # the link in the text and the button
        assert 'style="color:#0b7a4b"' in html
        assert "Open the document to sign" in html and "Hello Person 0," in html


# --- Dashboard home --------------------------------------------------------------------------


def test_home_counts_what_needs_attention_and_lists_batches_in_flight(app, users):
    busy = batchdata.batch_in_states(
        db.session,
        statuses=["sent"] * 4 + ["failed"] * 2 + ["bounced"],
        now=NOW,
        name="Offers",
        user_id=users["staff"].id,
    )
    done = batchdata.batch_in_states(
        db.session,
        statuses=["signed"] * 3 + ["declined"],
        now=NOW,
        name="Done",
        user_id=users["staff"].id,
        batch_status="closed",
    )
    old = batchdata.batch_in_states(
        db.session,
        statuses=["declined"],
        now=NOW - timedelta(days=60),
        name="Old",
        user_id=users["staff"].id,
        batch_status="closed",
    )
    soon = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == busy.id, SigningRequest.status == "sent").limit(3)
    ).all()
    db.session.execute(
        update(SigningRequest).where(SigningRequest.id.in_(soon[:2])).values(expires_at=NOW + timedelta(hours=5))
    )
    db.session.execute(
        update(SigningRequest).where(SigningRequest.id == soon[2]).values(expires_at=NOW + timedelta(days=3))
    )
    db.session.commit()

    found = home(db.session, now=NOW)
    assert [r.batch.name for r in found.in_flight] == ["Offers"]
    assert found.in_flight[0].progress.total == 7
    totals = {a.kind: a.total for a in found.attention}
    # The 60-day-old decline is history; without a viewer nothing waits for their approval.
    assert totals == {"approval": 0, "failed": 2, "bounced": 1, "expiring": 2, "declined": 1}
    declined = next(a for a in found.attention if a.kind == "declined")
    assert [(c.batch_name, c.count) for c in declined.batches] == [("Done", 1)]
    # The caller chooses which batches count (a per-user visibility filter slots in here).
    only_done = home(db.session, now=NOW, batch_ids=select(Batch.id).where(Batch.id.in_([done.id, old.id])))
    assert only_done.in_flight == () and {a.kind: a.total for a in only_done.attention}["failed"] == 0


def test_the_home_page_links_each_problem_to_the_filtered_recipients(client, auth, users):
    batch = batchdata.batch_in_states(
        db.session, statuses=["sent", "failed", "failed"], now=NOW, name="Offers", user_id=users["staff"].id
    )
    auth.login()
    page = client.get("/").get_data(as_text=True)
    assert f'href="/batches/{batch.id}?status=failed"' in page
    assert "Offers" in page and 'id="new-batch"' in page and "Batches in flight" in page
    assert re.search(r'data-kind="bounced">\s*<span class="n">0</span>', page)


def test_the_home_page_says_so_when_nothing_is_in_flight(client, auth):
    auth.login()
    page = client.get("/").get_data(as_text=True)
    assert "No batch is waiting for signatures" in page and "nothing to do" in page


# --- Caught mail (admin) ---------------------------------------------------------------------


def _catch(folder, n):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"{1700000000 + i}.000000-{i:08x}.eml").write_text(
            f"To: person{i}@example.org\r\nFrom: hr@example.com\r\nSubject: Offer {i}\r\n\r\nHello\r\n"
        )


def test_the_mailbox_pages_by_keyset_and_searches_address_and_subject(app, client, auth):
    from pathlib import Path

    _catch(Path(app.config["VAR_DIR"]) / "mailbox", 120)
    auth.login_admin()
    first = client.get("/admin/mailbox").get_data(as_text=True)
    assert first.count("<tr><td") == 50 and "Offer 119" in first and "Offer 69" not in first
    older = re.search(r'id="older" href="([^"]+)"', first).group(1).replace("&amp;", "&")
    second = client.get(older).get_data(as_text=True)
    assert second.count("<tr><td") == 50 and "Offer 69" in second and "Offer 70<" not in second
    found = client.get("/admin/mailbox?q=PERSON7@").get_data(as_text=True)
    assert found.count("<tr><td") == 1 and "Offer 7<" in found
    assert client.get("/admin/mailbox?q=Offer 11").get_data(as_text=True).count("<tr><td") == 11  # 11, 110–119
    assert client.get("/admin/mailbox?before=../../etc").status_code == 400


# --- Template errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, line, words, hint",
    [
        ("<p>Hello</p>\n<p>{{ I agree }}</p>", 2, "A placeholder has a space in it: {{ I agree }}", "{{ I_agree }}"),
        ("<p>{% if paid %}yes</p>", 1, "{% if %} is opened but never closed", "{% endif %}"),
        ("<p>{{ name }</p>", 1, "", "two braces"),
        ("{% endif %}", 1, "{% endif %} closes a block that was never opened", "{% if"),
        ("<p>{% hello %}</p>", 1, "{% hello %} is not an instruction", "{{ hello }}"),
    ],
)
def test_a_template_syntax_error_is_said_in_plain_words_with_its_line_and_a_hint(source, line, words, hint):
    with pytest.raises(TemplateError) as caught:
        extract_variables(source)
    error = caught.value
    assert error.line == line and str(words) in str(error.message) and hint in str(error.hint)
    assert "expected token" not in str(error.message)


def test_the_template_form_shows_the_plain_error_the_line_and_its_text(client, auth):
    auth.login()
    form = client.get("/templates/new")
    response = client.post(
        "/templates/new",
        data={
            "csrf_token": csrf_from(form),
            "name": "Offer",
            "html": "<h1>Offer</h1>\n<p>{{ I agree }} to the terms</p>",
        },
    )
    page = response.get_data(as_text=True)
    assert response.status_code == 422
    assert "Line 2:" in page and "A placeholder has a space in it" in page and "{{ I_agree }}" in page
    assert "&lt;p&gt;{{ I agree }} to the terms&lt;/p&gt;" in page and "expected token" not in page
    assert 'id="rich-pane"' in page and "pell-1.0.6.min.js" in page


def test_a_mailbox_search_opens_a_bounded_number_of_files_per_page_and_goes_on_from_there(tmp_path, monkeypatch):
    from bulksign.mail import devmail

    _catch(tmp_path, 30)
    monkeypatch.setattr(devmail, "SCAN_LIMIT", 10)
    first = devmail.list_caught(tmp_path, q="Offer 1")
    assert [m.subject for m in first.mails] == []  # 29…20 scanned: no match yet, but the search goes on
    second = devmail.list_caught(tmp_path, q="Offer 1", before=first.next_before)
    assert [m.subject for m in second.mails] == [f"Offer {i}" for i in range(19, 9, -1)]
    third = devmail.list_caught(tmp_path, q="Offer 1", before=second.next_before)
    assert [m.subject for m in third.mails] == ["Offer 1"] and third.next_before is None
