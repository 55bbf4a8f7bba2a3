"""The correction API's statuses random data does not reach, each reached on purpose (``test_api_contract``'s tour):
in a team that requires approval, a correction by the batch's creator waits (202), an admin's is made at once, a
correction asking for what already is changes nothing (200), and a waiting one is approved or rejected once."""

from __future__ import annotations

from sqlalchemy import select, update

from bulksign.core.extensions import db
from bulksign.models import SigningRequest
from bulksign.models.status import Status


def tour_corrections(call, batch: int, *, creator: dict, admin: dict, viewer: dict) -> None:
    request = db.session.scalars(
        select(SigningRequest).where(SigningRequest.batch_id == batch).order_by(SigningRequest.id.desc())
    ).first()
    assert request is not None
    # Out to its signer: what a correction is for.
    db.session.execute(update(SigningRequest).where(SigningRequest.id == request.id).values(status=Status.SENT))
    db.session.commit()
    label, url = "POST /requests/{request_id}/correction", f"/requests/{request.id}/correction"
    note = "The salary was last year's."

    call(label, "POST", url, 403, headers=viewer, json={"note": note, "names": {"recipient": "Someone Else"}})
    call(label, "POST", url, 422, headers=admin, json={"note": note, "values": {"no_such_column": "1"}})
    same = call(label, "POST", url, 200, headers=admin, json={"note": note, "names": {"recipient": request.name}})
    assert same.json["status"] == "unchanged"
    held = call(label, "POST", url, 202, headers=creator, json={"note": note, "names": {"recipient": "Anna Held"}})
    assert held.json["status"] == "waiting_for_approval"
    waiting = held.json["correction_id"]

    approve = "POST /batches/{batch_id}/corrections/{correction_id}/approve"
    reject = "POST /batches/{batch_id}/corrections/{correction_id}/reject"
    why = {"json": {"reason": "Ask her on the phone first."}}
    call(approve, "POST", f"/batches/{batch}/corrections/{waiting}/approve", 403, headers=creator)
    call(reject, "POST", f"/batches/{batch}/corrections/{waiting}/reject", 403, headers=viewer, **why)
    call(reject, "POST", f"/batches/{batch}/corrections/{waiting}/reject", 422, headers=admin, json={"reason": " "})
    call(approve, "POST", f"/batches/{batch}/corrections/999999/approve", 404, headers=admin)
    decided = call(approve, "POST", f"/batches/{batch}/corrections/{waiting}/approve", 202, headers=admin).json
    assert (decided["status"], decided["version"]) == ("applied", 2)
    call(approve, "POST", f"/batches/{batch}/corrections/{waiting}/approve", 409, headers=admin)
    call(reject, "POST", f"/batches/{batch}/corrections/{waiting}/reject", 409, headers=admin, **why)

    # Made a new version, the request is being prepared again: nothing more to correct until it is out.
    call(label, "POST", url, 409, headers=admin, json={"note": note, "names": {"recipient": "Anna Again"}})
    db.session.execute(update(SigningRequest).where(SigningRequest.id == request.id).values(status=Status.SENT))
    db.session.commit()
    other = call(label, "POST", url, 202, headers=creator, json={"note": note, "names": {"recipient": "Anna Other"}})
    rejected = other.json["correction_id"]
    done = call(reject, "POST", f"/batches/{batch}/corrections/{rejected}/reject", 202, headers=admin, **why).json
    assert done["status"] == "rejected"
    applied = call(label, "POST", url, 202, headers=admin, json={"note": note, "names": {"recipient": "Anna Now"}})
    assert (applied.json["status"], applied.json["version"]) == ("applied", 3)
