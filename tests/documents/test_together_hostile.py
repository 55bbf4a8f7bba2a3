"""Templates that try to put one recipient's data on another's pages, through the render job as it runs.

Each case asserts the text of every recipient's stored PDF: its own values present, nobody else's. The frame keeps
each body on its own pages (``html_frame``); every part is checked before it is stored (``part_check``); a part
that fails refuses the run, the version goes one by one from then on, and the template page and the API say why.
"""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import select

from bulksign.batches.rendering import render_chunk
from bulksign.core.extensions import db
from bulksign.documents import html_frame, together
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, Document, SigningRequest
from bulksign.models.status import Status
from bulksign.people.users import create_api_key
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.pdf_compare import pdf_text

PEOPLE = [
    ("alice@example.com", "Alice Adams"),
    ("bob@example.com", "Bob Brown"),
    ("carol@example.com", "Carol Clark"),
    ("dan@example.com", "Dan Dorsey"),
]
#: Bob (1001) and Dan (1003) have a private note; Alice and Carol do not.
NOTE = "{% if salary in ('1001', '1003') %}"
HEAD = (
    "<!doctype html><meta charset='utf-8'><style>body{font-family:'DejaVu Serif'}</style><body>"
    "<h1>Contract for {{ name }}</h1><p>Salary {{ salary }}</p>"
)
FILLER = "<p>The Employee shall perform the duties of the position with care.</p>" * 12
GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="

#: Placed so that, rendered together without the frame, each lands on another recipient's page; with it, each
#: stays on its own and shows.
HOSTILE = {
    "absolute": f"{FILLER}{NOTE}<div style='position:absolute;top:40px'>Medical leave of {{{{ name }}}}</div>"
    "{% endif %}",
    "negative-margin": f"<p>x</p>{NOTE}<p style='margin-top:-30px'>Medical leave of {{{{ name }}}}</p>{{% endif %}}"
    + FILLER,
    "fixed-footer": f"{FILLER}{NOTE}<div style='position:fixed;bottom:0'>Note {{{{ name }}}} earns {{{{ salary }}}}"
    "</div>{% endif %}",
    "page-breaks-overridden": f"{NOTE}<style>*{{page-break-before:avoid!important;page-break-after:avoid!important}}"
    "div{page-break-inside:avoid!important}</style><p>Medical leave of {{ name }}</p>{% endif %}" + FILLER,
    "transform": f"{FILLER}{NOTE}<p style='-webkit-transform:translateY(-40px)'>Medical leave of {{{{ name }}}}</p>"
    "{% endif %}",
    "float-overflow": f"{NOTE}<div style='float:left;height:1500px;overflow:visible'>Medical leave of "
    "{{ name }}</div>{% endif %}<p>After the float.</p>",
    "before-content-and-counters": "<style>h2{counter-increment:c} h2::before{content:counter(c) '. '}"
    ".n::before{content:'Private: '} body{counter-reset:c}</style><h2>Duties</h2><h2>Pay</h2>"
    f"{NOTE}<h2>Leave</h2><p class='n'>Medical leave of {{{{ name }}}}</p>{{% endif %}}",
    "page-rules": f"{NOTE}<style>@page{{margin:5cm}} @page :first{{margin-top:9cm}}</style>"
    "<p>Medical leave of {{ name }}</p>{% endif %}" + FILLER,
    "repeating-table-header": "<table>"
    f"{NOTE}<thead><tr><th>Medical leave of {{{{ name }}}}</th></tr></thead>{{% endif %}}<tbody>"
    "{% for i in range(70) %}<tr><td>Month {{ i }}</td></tr>{% endfor %}</tbody></table>",
    "image-sized-by-row": f"<img src='{GIF}' width='{{{{ salary|int // 4 }}}}' height='{{{{ salary|int // 2 }}}}'>"
    f"{NOTE}<p>Medical leave of {{{{ name }}}}</p>{{% endif %}}",
    "positional-selectors": "<style>:nth-child(3){font-size:30px} div:nth-child(odd)::after{content:'odd'}</style>"
    f"{NOTE}<p>Medical leave of {{{{ name }}}}</p>{{% endif %}}",
}
#: Bodies that leave open what would swallow the frame's end or run on into the next recipient's: Bob and Dan's
#: documents are rendered alone, Alice's and Carol's together.
UNBALANCED = {
    "unclosed-div": f"{NOTE}<div style='position:fixed;top:0'>Medical leave of {{{{ name }}}}{{% endif %}}",
    "extra-end-tags": f"{NOTE}</div></div><div style='position:fixed;top:0'>Medical leave of {{{{ name }}}}</div>"
    "{% endif %}",
    "unclosed-bold": f"{NOTE}<b>Medical leave of {{{{ name }}}}{{% endif %}}<p>end</p>",
    "unclosed-link": f"{NOTE}<a href='mailto:{{{{ salary }}}}@example.com'>Medical leave of "
    "{{ name }}{% endif %}<p>end</p>",
}


@pytest.fixture
def runs(monkeypatch):
    """The wkhtmltopdf runs, by how many documents each held (1: one alone)."""
    made = []
    real = together.render_pdf

    def counting(html, **kwargs):
        made.append(html.count(html_frame.FIRST_PAGE_URI))
        return real(html, **kwargs)

    monkeypatch.setattr(together, "render_pdf", counting)
    return made


def _stored(batch_id: int) -> dict[str, str]:
    """Each recipient's stored PDF's text, by name."""
    texts = {}
    for request in requests_of(batch_id):
        assert request.status == Status.GENERATED, (request.name, request.error_message)
        original = db.session.scalar(select(Document).where(Document.request_id == request.id))
        texts[request.name] = pdf_text(get_storage().get(original.storage_key))
    return texts


def _assert_each_holds_its_own_only(texts: dict[str, str], *, noted=("Bob Brown", "Dan Dorsey")) -> None:
    for name, text in texts.items():
        assert f"Contract for {name}" in text
        assert ("Medical" in text or "Note" in text) == (name in noted), name
        others = [other for _, other in PEOPLE if other != name and other in text]
        assert not others, f"{name}'s PDF holds {others}"


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_block_stays_in_its_own_recipients_pdf(app, users, runs, case):
    app.config["RENDER_TOGETHER"] = True
    batch = make_batch(user=users["staff"], now=NOW, recipients=PEOPLE, html=HEAD + HOSTILE[case] + "</body>")
    assert "generated 4" in render_chunk(request_ids(batch), app=app)
    assert sum(runs) == 4 and max(runs) >= 2, f"rendered together (runs of {runs})"
    _assert_each_holds_its_own_only(_stored(batch))
    assert db.session.get(Batch, batch).template_version.render_alone is None


@pytest.mark.parametrize("case", UNBALANCED)
def test_a_body_that_does_not_close_what_it_opens_is_rendered_alone(app, users, runs, case):
    app.config["RENDER_TOGETHER"] = True
    batch = make_batch(user=users["staff"], now=NOW, recipients=PEOPLE, html=HEAD + UNBALANCED[case] + "</body>")
    assert "generated 4" in render_chunk(request_ids(batch), app=app)
    assert sorted(runs) == [1, 1, 2], "Alice and Carol together, Bob and Dan each alone"
    _assert_each_holds_its_own_only(_stored(batch))


def test_the_check_refuses_a_run_whose_frame_let_a_block_out(app, monkeypatch):
    """Without the frame's containment (as before it), Bob's fixed note lands on Alice's first page: the check of
    every part finds it, and the run is refused."""
    monkeypatch.setattr(html_frame, "_DOCUMENT", "display:block;position:relative")
    monkeypatch.setattr(html_frame, "_INNER", "display:block")
    template = HEAD + "<p>x</p>" + NOTE + "<div style='position:fixed;top:40px'>Medical leave {{ name }}</div>"
    template += "{% endif %}</body>"
    rows = {i: {"name": name, "salary": str(1000 + i)} for i, (_, name) in enumerate(PEOPLE)}
    from bulksign.doc_templates.jinja_sandbox import render_html

    filled = [together.Filled.of(render_html(template, row)) for row in rows.values()]
    refused = together.render_run(filled, timeout=60)
    assert isinstance(refused, together.NotTogether) and refused.lasting
    assert "not its own recipient's" in refused.message and "FOREIGN" in refused.detail


#: Bob's note is moved off the page: alone it shows nowhere, and a part holding less than its own text cannot be
#: told from one drawn as shapes, so the check refuses the run.
CLIPPED = HEAD + "<p>x</p>" + NOTE + "<p style='margin-top:-900px'>{{ name }}: " + "medical leave " * 20
CLIPPED += "</p>{% endif %}</body>"


def test_a_run_that_fails_its_check_is_rendered_one_by_one_and_its_version_says_so_from_then_on(
    app, users, runs, client, auth, caplog
):
    app.config["RENDER_TOGETHER"] = True
    batch = make_batch(user=users["staff"], now=NOW, recipients=PEOPLE, html=CLIPPED)
    with caplog.at_level(logging.WARNING, logger="bulksign.doc_templates.together"):
        assert "generated 4" in render_chunk(request_ids(batch), app=app)
    assert runs == [4, 1, 1, 1, 1], "one run, refused; then each alone"
    texts = _stored(batch)
    assert all(f"Contract for {name}" in texts[name] for _, name in PEOPLE)
    version = db.session.get(Batch, batch).template_version
    assert version.render_alone["msgid"] == together.part_check.Problem.UNREADABLE.message.msgid
    assert version.render_alone["batch_id"] == batch
    told = [r for r in caplog.records if "rendered one by one from now on" in r.getMessage()]
    assert len(told) == 1

    # The next batch on the version goes one by one without a try, and says nothing again.
    runs.clear()
    caplog.clear()
    again = make_batch(user=users["staff"], now=NOW, recipients=PEOPLE[:2], version=version)
    with caplog.at_level(logging.WARNING, logger="bulksign.doc_templates.together"):
        assert "generated 2" in render_chunk(request_ids(again), app=app)
    assert runs == [1, 1] and not caplog.records

    auth.login()
    page = client.get(f"/templates/{version.template_id}").get_data(as_text=True)
    assert "One by one (slower), because some of its text is printed in a way that cannot be read back" in page
    secret = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    listed = client.get("/api/v1/templates", headers={"Authorization": f"Bearer {secret}"}).get_json()["items"]
    [found] = [t for t in listed if t["id"] == version.template_id]
    assert found["render_together"] is False
    assert found["render_alone_reason"].startswith("some of its text is printed in a way that cannot be read back")


def test_a_template_that_renders_together_says_so(app, users, client, auth):
    version = db.session.get(
        Batch, make_batch(user=users["staff"], now=NOW, recipients=PEOPLE[:1], html=HEAD + "</body>")
    ).template_version
    auth.login()
    page = client.get(f"/templates/{version.template_id}").get_data(as_text=True)
    assert "Many at a time, each one checked to hold its own recipient’s data only" in page
    app.config["RENDER_TOGETHER"] = False
    page = client.get(f"/templates/{version.template_id}").get_data(as_text=True)
    assert "switched off on this server (RENDER_TOGETHER)" in page


def test_with_render_together_off_each_document_is_rendered_alone(app, users, runs):
    app.config["RENDER_TOGETHER"] = False
    batch = make_batch(user=users["staff"], now=NOW, recipients=PEOPLE, html=HEAD + HOSTILE["absolute"] + "</body>")
    assert "generated 4" in render_chunk(request_ids(batch), app=app)
    assert runs == [1, 1, 1, 1]
    _assert_each_holds_its_own_only(_stored(batch))


def test_a_stored_part_is_the_recipients_solo_render(app, users):
    """What the job stores from a run is what the preview shows for the same row."""
    from bulksign.batches.rendering import document_context
    from bulksign.doc_templates.kinds import render_document
    from tests.support.pdf_compare import same_pages

    app.config["RENDER_TOGETHER"] = True
    batch = make_batch(user=users["staff"], now=NOW, recipients=PEOPLE, html=HEAD + HOSTILE["fixed-footer"] + "</body>")
    render_chunk(request_ids(batch), app=app)
    for request in db.session.scalars(select(SigningRequest).where(SigningRequest.batch_id == batch)):
        original = db.session.scalar(select(Document).where(Document.request_id == request.id))
        preview = render_document(request.batch.template_version, document_context(request), timeout=60)
        assert same_pages(get_storage().get(original.storage_key), preview), request.name
