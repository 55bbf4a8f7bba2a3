"""Every id in a staff or API URL is looked up through ``access`` before the view runs: an id out of the user's
sight is a 404, for every route, new ones included (docs/architecture/views.md)."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, current_app, request
from flask_login import current_user
from werkzeug.exceptions import Forbidden, NotFound, UnprocessableEntity

from bulksign.core.extensions import db
from bulksign.core.messages import N_
from bulksign.people import access

#: URL argument → the look-up that refuses an id the user may not see.
LOOKUPS: dict[str, Callable[..., object]] = {
    "batch_id": access.batch_for_read,
    "request_id": access.request_for_read,
    "template_id": access.template_for_use,
}
#: Largest id each looked-up table holds (requests have 64-bit ids, the others 32-bit): a larger one is no row's,
#: and PostgreSQL would refuse to compare it (a 400 where "not found" is the answer).
MAX_IDS = {"batch_id": 2**31 - 1, "request_id": 2**63 - 1, "template_id": 2**31 - 1}
#: Blueprints only admins reach (checked by their own hooks).
ADMIN_ONLY = ("admin", "rq_dashboard")
_AS_HTTP = {404: NotFound, 403: Forbidden, 422: UnprocessableEntity}


def init_app(app: Flask) -> None:
    @app.before_request
    def _ids_within_reach():
        # Registered after the default-deny hook: the user is known (session or API key) when this runs.
        if not request.view_args or request.blueprint in ADMIN_ONLY:
            return None
        view = current_app.view_functions.get(request.endpoint or "")
        if view is None or getattr(view, "_bulksign_public", False):
            return None
        user = current_user._get_current_object()
        for name, lookup in LOOKUPS.items():
            if name in request.view_args:
                if request.view_args[name] > MAX_IDS[name]:
                    raise access.Refused(N_("There is nothing at this address."), 404)
                lookup(db.session, **{name: request.view_args[name]}, user=user)
        return None

    @app.template_global()
    def team_choice() -> access.TeamChoice:
        """The teams the logged-in user may put a new batch or template in (forms ask when ``offered``)."""
        return access.team_choice(db.session, user=current_user)

    @app.template_global()
    def may_edit_template(template) -> bool:
        """Whether the user may save new versions of ``template`` (the Edit button shows only then)."""
        return access.may_edit_template(db.session, template=template, user=current_user)

    @app.errorhandler(access.Refused)
    def _refused(error: access.Refused):
        # Through the HTTP error handlers: a page, a fragment's error or the API's JSON, as for any 404/403.
        db.session.rollback()
        return current_app.handle_http_exception(_AS_HTTP.get(error.status, Forbidden)(str(error.message)))
