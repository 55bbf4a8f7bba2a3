"""``POST /api/v1/batches`` with its own keeping periods: kept with the batch over its team's, refused out of range."""

from __future__ import annotations

import io

from sqlalchemy import func, select

from bulksign.batches import retention
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch
from bulksign.people.users import create_api_key
from tests.support.clock import NOW


def test_a_batch_created_over_the_api_keeps_its_own_periods(client, users):
    template = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    secret = create_api_key(db.session, user=users["staff"], name="test", now=NOW).secret
    db.session.commit()

    def create(**fields):
        return client.post(
            "/api/v1/batches",
            data={
                "template_id": template.template.id,
                "file": (io.BytesIO(b"email,name\na@example.com,A\n"), "p.csv"),
                **fields,
            },
            headers={"Authorization": f"Bearer {secret}"},
            content_type="multipart/form-data",
        )

    refused = create(keep_unsigned_days="0")
    assert refused.status_code == 400 and refused.json["error"]["details"]["fields"][0]["field"] == "keep_unsigned_days"
    assert db.session.scalar(select(func.count()).select_from(Batch)) == 0
    made = create(keep_signed_days="3650", keep_unsigned_days="30")
    plain = create()
    assert (made.status_code, plain.status_code) == (201, 201)
    found = retention.policies(db.session, [made.json["id"], plain.json["id"]])
    assert (found[made.json["id"]].keep_signed_days, found[made.json["id"]].keep_unsigned_days) == (3650, 30)
    assert (found[plain.json["id"]].keep_signed_days, found[plain.json["id"]].keep_unsigned_days) == (None, 90)
