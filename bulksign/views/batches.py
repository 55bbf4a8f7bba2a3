"""Staff pages for batches: the list and one batch. (Filled in by the dashboard work.)"""
from __future__ import annotations

from flask import Blueprint, abort, render_template
from sqlalchemy import select

from ..batches import counts_for
from ..extensions import db
from ..models import Batch

bp = Blueprint("batches", __name__, url_prefix="/batches")


@bp.get("/")
def index():
    batches = db.session.scalars(select(Batch).order_by(Batch.created_at.desc()).limit(50)).all()
    return render_template("batches/index.html", batches=batches, counts=counts_for(db.session, [b.id for b in batches]))


@bp.get("/<int:batch_id>")
def detail(batch_id: int):
    batch = db.session.get(Batch, batch_id) or abort(404)
    return render_template("batches/detail.html", batch=batch, counts=counts_for(db.session, [batch.id])[batch.id])
