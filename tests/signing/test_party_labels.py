"""Parties named by their template's labels wherever people read them: each signer's page says who they sign as,
and the sealed PDF's signature blocks and audit certificate name both parties by label in the batch's language,
never by key; the template's fixed person and signing order are the batch's when it names none."""

from __future__ import annotations

from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template, save_parties
from bulksign.documents.storage import get_storage
from bulksign.models import Document, SigningRequest, utcnow
from tests.signing.test_routing import CONTRACT, _mails_to, _sign, _text, _token
from tests.support.batches import request_ids

PARTIES = [
    {"key": "recipient", "labels": {"en": "Employee", "ru": "Работник"}, "colour": "#1f6feb", "source": "row"},
    {
        "key": "employer",
        "labels": {"en": "Employer", "ru": "Работодатель"},
        "colour": "#b35900",
        "source": "fixed",
        "name": "Anna Boss",
        "email": "hr@acme.example",
    },
]


def _russian_batch(users) -> int:
    from bulksign.batches.batch_settings import BatchSettings, party_settings_from_form
    from bulksign.batches.creation import create_batch
    from bulksign.doc_templates.columns import needed_columns
    from bulksign.recipients.validation import validate_recipients

    saved = create_template(db.session, name="Трудовой договор", html=CONTRACT, user=users["staff"], now=utcnow())
    version = save_parties(
        db.session, template=saved.template, parties=PARTIES, routing=None, user=users["staff"], now=utcnow()
    ).version
    db.session.commit()
    signers = party_settings_from_form({}, version=version)  # nobody named: the template's fixed person signs
    report = validate_recipients(
        b"email,name\neva@example.com,Eva Employee\n",
        filename="r.csv",
        variables=needed_columns(version),
        keep_rows=True,
        **signers.file_check,
    )
    assert not report.errors, report.errors
    batch = create_batch(
        db.session,
        user=users["staff"],
        template_version=version,
        rows=report.recipients,
        settings=BatchSettings(name="Договоры", language="ru"),
        now=utcnow(),
        party_settings=signers,
    ).batch
    return batch.id


def test_each_signer_reads_their_own_label_and_the_russian_certificate_names_both(
    app, users, client, smtp, run_jobs, tmp_path
):
    from bulksign.work.pipeline import enqueue_renders

    (request_id,) = request_ids(_russian_batch(users))
    enqueue_renders([request_id])
    run_jobs("pdf", "mail")
    employee = _token(_mails_to(smtp, "eva@example.com")[0])
    assert "(подписывает как Работник)" in client.get(f"/sign/{employee}").get_data(as_text=True)
    assert _sign(client, employee, "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    employer = _token(_mails_to(smtp, "hr@acme.example")[0])
    page = client.get(f"/sign/{employer}").get_data(as_text=True)
    assert "(подписывает как Работодатель)" in page and "как employer" not in page
    assert _sign(client, employer, "Anna Boss").status_code == 303
    run_jobs("pdf", "mail")
    assert db.session.get(SigningRequest, request_id).status == "signed"
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    text = _text(get_storage().get(signed.storage_key), tmp_path, "signed.pdf")
    certificate = " ".join(text[text.index("Сертификат аудита") :].split())
    assert "Работник: Eva Employee <eva@example.com>" in certificate
    assert "Работодатель: Anna Boss <hr@acme.example>" in certificate
    assert "Подписано: Работодатель" in certificate and "Подписано: Работник" in certificate
    assert "recipient" not in certificate and "employer" not in certificate


def test_the_new_batch_page_starts_from_the_templates_order_and_person_and_the_batch_may_change_the_order(
    app, users, client, auth
):
    import io
    import json
    import re

    from bulksign.models import Party
    from tests.support.web import csrf_from

    saved = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=utcnow())
    save_parties(
        db.session,
        template=saved.template,
        parties=PARTIES,
        routing=[["employer"], ["recipient"]],
        user=users["staff"],
        now=utcnow(),
    )
    db.session.commit()
    auth.login()
    page = client.get(f"/batches/new?template_id={saved.template.id}")
    html = page.get_data(as_text=True)
    assert "Who signs as Employer" in html and "Left blank: Anna Boss, hr@acme.example, as the template names." in html
    order = html[html.index('id="steps"') : html.index("</ol>", html.index('id="steps"'))]
    assert re.findall(r'class="chip-label">([^<]+)<', order) == ["Employer", "Employee"]
    assert 'value="[[&#34;employer&#34;], [&#34;recipient&#34;]]"' in html
    preview = client.post(
        "/batches/new/validate",
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": saved.template.id,
            "file": (io.BytesIO(b"email,name\neva@example.com,Eva\n"), "r.csv"),
            "routing": json.dumps([["recipient", "employer"]]),
        },
    )
    shown = preview.get_data(as_text=True)
    assert "Create batch with 1 valid row" in shown, shown[-2000:]
    carried = dict(re.findall(r'<input type="hidden" name="(party_[a-z_]+|routing)" value="([^"]*)"', shown))
    carried = {k: v.replace("&#34;", '"') for k, v in carried.items()}
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', shown).group(1)
    made = client.post(
        "/batches/new", data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": "f1", **carried}
    )
    assert made.status_code == 303, made.get_data(as_text=True)[-2000:]
    found = db.session.scalars(select(Party).order_by(Party.role)).all()
    assert [(p.role, p.step, p.email) for p in found] == [("employer", 0, "hr@acme.example"), ("recipient", 0, None)]
