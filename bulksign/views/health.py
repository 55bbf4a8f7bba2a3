"""``GET /healthz`` for load balancers: 200 when the database and Redis answer, 503 otherwise."""
from __future__ import annotations

from flask import Blueprint, jsonify

from ..auth import public
from ..extensions import db, get_redis
from ..services import check_services

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@public
def healthz():
    report = check_services(db_engine=db.engine, redis=get_redis())
    return jsonify(status="ok" if report.ok else "unavailable", checks=report.checks), (200 if report.ok else 503)
