"""JSON API, version 1: shared helpers and the account endpoint. Areas add their own ``api_*`` blueprints."""
from __future__ import annotations

from flask import Blueprint, g, jsonify

from .. import access
from ..extensions import db

bp = Blueprint("api", __name__, url_prefix="/api/v1")


def api_error(message: str, status: int, **extra):
    """A JSON error response: ``{"error": message, ...}``."""
    response = jsonify(error=str(message), **extra)  # domain messages translate here, at the edge
    response.status_code = status
    return response


@bp.get("/me")
def me():
    user = g.api_user
    return jsonify(id=user.id, email=user.email, role=user.role,
                   teams=[{"id": t.id, "name": t.name} for t in access.teams_of(db.session, user=user)])
