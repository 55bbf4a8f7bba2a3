"""The new-batch form's own keeping periods: blank keeps the team's, a number overrules it, a bad one is refused
on its field."""

from __future__ import annotations

import io
import re

from sqlalchemy import select

from bulksign.batches import retention
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, utcnow
from tests.support.web import csrf_from


def _create(client, template_id: int, **fields):
    page = client.get(f"/batches/new?template_id={template_id}")
    assert "Keep unsigned requests (days after they ended)" in page.get_data(as_text=True)
    preview = client.post(
        "/batches/new/validate",
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": template_id,
            "file": (io.BytesIO(b"email,name\nanna@example.com,Anna\n"), "people.csv"),
        },
    )
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)
    token = re.search(r'name="form_token" value="([0-9a-f]+)"', page.get_data(as_text=True)).group(1)
    return client.post(
        "/batches/new",
        data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": token, **fields},
    )


def test_a_batch_keeps_its_own_periods_or_its_team_s(client, auth, users):
    template = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=utcnow())
    db.session.commit()
    auth.login()
    refused = _create(client, template.template.id, keep_unsigned_days="0")
    assert refused.status_code == 422 and "Give Keep unsigned requests as a number of days from 1 to 36500" in (
        refused.get_data(as_text=True)
    )
    assert db.session.scalar(select(Batch.id)) is None

    assert _create(client, template.template.id, keep_signed_days="3650", keep_unsigned_days="14").status_code == 303
    assert _create(client, template.template.id, keep_signed_days="", keep_unsigned_days="").status_code == 303
    own, plain = db.session.scalars(select(Batch.id).order_by(Batch.id)).all()
    found = retention.policies(db.session, [own, plain])
    assert (found[own].keep_signed_days, found[own].keep_unsigned_days) == (3650, 14)
    assert (found[plain].keep_signed_days, found[plain].keep_unsigned_days) == (None, 90)
