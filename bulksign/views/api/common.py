"""JSON API, version 1: what every operation shares (``@operation``, parsing, errors, idempotency, the rate limit)
and the account endpoint; areas add their own ``api_*`` blueprints (docs/architecture/views.md)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from flask import Blueprint, Flask, current_app, g, jsonify, request, url_for
from flask_limiter.util import get_remote_address
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bulksign.core.errors import BulksignError, Message
from bulksign.core.extensions import db, limiter
from bulksign.core.schemas import MAX_BIG_ID, MAX_ID
from bulksign.integrations import idempotency
from bulksign.models import utcnow
from bulksign.people import access
from bulksign.views.errors import error_body

bp = Blueprint("api", __name__, url_prefix="/api/v1")

M = TypeVar("M", bound=BaseModel)
#: Most rows one page of any list holds, and the default.
MAX_LIMIT, DEFAULT_LIMIT = 500, 50
#: Answers a replay of an idempotent call carries, so a client can tell it did not run again.
REPLAYED_HEADER = "Idempotent-Replayed"
#: What an ``Idempotency-Key`` may be: visible ASCII, no spaces.
IDEMPOTENCY_KEY = re.compile(rf"[!-~]{{1,{idempotency.MAX_KEY_LENGTH}}}")


# --- the shapes every operation shares --------------------------------------------------------------

RecordId = Annotated[int, Field(ge=1, le=MAX_ID)]
RequestId = Annotated[int, Field(ge=1, le=MAX_BIG_ID)]


class ErrorInfo(BaseModel):
    code: str = Field(
        description="Machine-readable: `bad_request`, `validation_failed`, `not_found`, "
        "`rate_limited`, `idempotency_key_reused`, ..."
    )
    message: str = Field(description="For people: what is wrong and what to do.")
    details: dict[str, Any] | None = Field(
        description="More about the error (the fields at fault, a file's row errors), or null."
    )


class ErrorResponse(BaseModel):
    """Every error of the API, whatever the status."""

    error: ErrorInfo


class PageQuery(BaseModel):
    """Keyset paging, the same for every list: pass ``next_cursor`` back as ``cursor`` until it is null."""

    cursor: str | None = Field(
        None, max_length=2000, description="`next_cursor` of the previous page; leave out for the first page."
    )
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="Most items on this page.")


class NextCursor(BaseModel):
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class ApiError(BulksignError):
    """Raised by a view or a parser: answered as ``{"error": {...}}`` with ``status``."""

    def __init__(
        self,
        message: Message,
        status: int,
        *,
        code: str | None = None,
        details: dict | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message, status=status)
        self.code, self.details = code, details
        #: Sent with the answer (``Retry-After`` for something not ready yet).
        self.headers = headers or {}


def api_error(message: Message, status: int, *, code: str | None = None, details: dict | None = None):
    """A JSON error response in the API's one shape."""
    response = jsonify(error_body(status, message, code=code, details=details))
    response.status_code = status
    return response


def absolute_url(endpoint: str, **values) -> str:
    """A URL the API gives out, under ``APP_URL`` as the links in mail and in webhook payloads: the same URL whichever
    host the call came in by."""
    return current_app.config["APP_URL"] + url_for(endpoint, **values)


def answer(model: BaseModel, status: int = 200):
    """A JSON response from the operation's response model (fields never set, like an absent suggestion, left out)."""
    response = jsonify(model.model_dump(mode="json", exclude_unset=True))
    response.status_code = status
    return response


# --- declaring operations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """An OpenAPI link: a value of this answer is a parameter of another operation (stateful testing, docs)."""

    endpoint: str
    parameters: dict[str, str]


@dataclass(frozen=True)
class Operation:
    summary: str
    tag: str
    #: Success status → response model, or a media type (``text/csv``) for a file, or a tuple of the types it may be.
    responses: dict[int, type[BaseModel] | str | tuple[str, ...]]
    #: Error statuses this operation itself answers (401 and 429 are added for every authenticated one).
    errors: tuple[int, ...] = ()
    body: type[BaseModel] | None = None
    #: A multipart form (a file upload) instead of a JSON body.
    form: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    #: Takes ``Idempotency-Key`` (every operation that creates something).
    idempotent: bool = False
    #: Whether a body is optional (a JSON body that may be left out).
    body_optional: bool = False
    links: dict[int, dict[str, Link]] = field(default_factory=dict)
    description: str = ""


def operation(
    summary: str,
    *,
    tag: str,
    responses: dict,
    errors: tuple[int, ...] = (),
    body=None,
    form=None,
    query=None,
    idempotent: bool = False,
    body_optional: bool = False,
    links: dict | None = None,
):
    """Declare an API view for the description; ``idempotent`` also makes it honour ``Idempotency-Key``."""

    def decorate(view):
        wrapped = _idempotent(view) if idempotent else view
        wrapped.api_operation = Operation(
            summary=summary,
            tag=tag,
            responses=responses,
            errors=errors,
            body=body,
            form=form,
            query=query,
            idempotent=idempotent,
            body_optional=body_optional,
            links=links or {},
            description=inspect.cleandoc(view.__doc__ or ""),
        )
        return wrapped

    return decorate


def _validation_details(exc: ValidationError) -> dict:
    return {
        "fields": [
            {"field": ".".join(str(p) for p in e["loc"]) or None, "message": e["msg"]}
            for e in exc.errors(include_url=False, include_input=False)
        ]
    }


def validation_error(exc: ValidationError, what: str) -> ApiError:
    """A 400 naming each field at fault, from pydantic's errors."""
    details = _validation_details(exc)
    summary = "; ".join(f"{f['field']}: {f['message']}" if f["field"] else f["message"] for f in details["fields"])
    return ApiError(f"The {what} is not valid: {summary}", 400, code="validation_failed", details=details)


def parse_form(model: type[M]) -> M:
    """The multipart fields checked against ``model`` (the file itself is read by the view); ApiError 400 otherwise,
    415 for a body that is not a multipart form (a JSON body would otherwise be read as an empty form)."""
    if request.mimetype != "multipart/form-data":
        sent = f"Content-Type {request.mimetype}" if request.mimetype else "no Content-Type"
        raise ApiError(
            f"This operation takes multipart/form-data (the fields and the file as form parts, e.g. curl -F "
            f"template_id=1 -F file=@people.csv), not {sent}.",
            415,
            code="unsupported_media_type",
            details={"expected": "multipart/form-data", "received": request.mimetype or None},
        )
    try:
        # Only whether a file came: its bytes are read once, by the view.
        given = {"file": b""} if request.files.get("file") else {}
        return model.model_validate({**request.form.to_dict(), **given})
    except ValidationError as exc:
        raise validation_error(exc, "form") from None


def parse_body(model: type[M], *, optional: bool = False, usage: str | None = None) -> M:
    """The JSON body as ``model`` (strict types: ``true`` is no number); ApiError 400 otherwise (``usage`` says how)."""
    if optional and not request.get_data():
        return model()
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise ApiError(usage or "Send a JSON object (Content-Type: application/json).", 400, code="validation_failed")
    try:
        return model.model_validate(_whole_floats_as_ints(body), strict=True)
    except ValidationError as exc:
        error = validation_error(exc, "request body")
        if usage:
            error.message = usage
        raise error from None


def _whole_floats_as_ints(value):
    # JSON Schema counts 2.0 as an integer; strict pydantic would not (its float fields take ints as well).
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_whole_floats_as_ints(v) for v in value]
    if isinstance(value, dict):
        return {k: _whole_floats_as_ints(v) for k, v in value.items()}
    return value


def parse_query(model: type[M]) -> M:
    """The query string as ``model`` (text converted to numbers where the model says so); ApiError 400 otherwise."""
    try:
        return model.model_validate(request.args.to_dict())
    except ValidationError as exc:
        raise validation_error(exc, "query string") from None


# --- Idempotency-Key --------------------------------------------------------------------------------


def _request_fingerprint() -> str:
    """Method, path and body; a multipart body by its fields and files (curl picks a new boundary every time)."""
    if request.files or request.form:
        fields = sorted((k, v) for k, values in request.form.lists() for v in values)
        files = []
        for name, upload in request.files.items(multi=True):
            files.append((name, upload.filename, hashlib.sha256(upload.read()).hexdigest()))
            upload.stream.seek(0)
        body = json.dumps([fields, sorted(files)]).encode()
    else:
        body = request.get_data()
        try:
            body = json.dumps(json.loads(body), sort_keys=True).encode()
        except ValueError:
            pass  # not JSON: the bytes as sent
    return idempotency.fingerprint(request.method.encode(), request.path.encode(), body)


def _idempotent(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return view(*args, **kwargs)
        if not IDEMPOTENCY_KEY.fullmatch(key):
            return api_error(
                f"Idempotency-Key must be 1 to {idempotency.MAX_KEY_LENGTH} visible ASCII characters (a UUID, say).",
                400,
                code="validation_failed",
            )
        claim = idempotency.claim(
            db.session, api_key_id=g.api_key_id, key=key, fingerprint=_request_fingerprint(), now=utcnow()
        )
        if claim.outcome == idempotency.ClaimOutcome.MISMATCH:
            return api_error(
                "This Idempotency-Key was used for a different request; use a new key for a new request.",
                422,
                code="idempotency_key_reused",
            )
        if claim.outcome == idempotency.ClaimOutcome.IN_PROGRESS:
            return api_error(
                "A request with this Idempotency-Key is still running; retry in a few seconds.",
                409,
                code="idempotency_key_in_use",
            )
        if claim.outcome == idempotency.ClaimOutcome.REPLAY:
            assert claim.status_code is not None  # a replay has the answer kept
            response = jsonify(claim.body)
            response.status_code = claim.status_code
            response.headers[REPLAYED_HEADER] = "true"
            return response
        try:
            response = current_app.make_response(view(*args, **kwargs))
        except Exception:
            db.session.rollback()
            idempotency.record(db.session, api_key_id=g.api_key_id, key=key, status_code=None, body=None)
            db.session.commit()
            raise
        db.session.rollback()  # whatever the view left unfinished is not ours to commit
        idempotency.record(
            db.session,
            api_key_id=g.api_key_id,
            key=key,
            status_code=response.status_code,
            body=response.get_json(silent=True),
        )
        db.session.commit()
        return response

    return wrapped


# --- rate limits per API key ------------------------------------------------------------------------


def _rate_limit_key() -> str:
    # Runs before authentication: the key's hash names the caller (no database look-up per request).
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and secret.strip():
        return "api-key:" + hashlib.sha256(secret.strip().encode()).hexdigest()[:32]
    return "api-ip:" + get_remote_address()


def limit_per_key(blueprint: Blueprint) -> None:
    """Every API blueprint shares one ``API_RATE_LIMIT`` budget per API key (per address without a key)."""
    # Blueprints and the limiter are module-level, shared by every app a process builds: decorate once, or each
    # new app would add another limit and every call would count several times.
    if not getattr(blueprint, "_bulksign_rate_limited", False):
        limiter.shared_limit(lambda: current_app.config["API_RATE_LIMIT"], scope="api", key_func=_rate_limit_key)(
            blueprint
        )
        blueprint._bulksign_rate_limited = True  # type: ignore[attr-defined]  # a mark on the shared object


def init_app(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(error: ApiError):
        db.session.rollback()
        response = api_error(error.message, error.status, code=error.code, details=error.details)
        response.headers.update(error.headers)
        return response


# --- the account --------------------------------------------------------------------------------------


class TeamOut(BaseModel):
    id: int
    name: str


class Me(BaseModel):
    model_config = ConfigDict(title="Me")
    id: int
    email: str
    role: str = Field(description="`admin`, `manager`, `staff` or `viewer`.")
    teams: list[TeamOut]


@bp.get("/me")
@operation("The user the API key belongs to", tag="Account", responses={200: Me})
def me():
    """Who the key acts as, with the teams whose batches and templates it reaches."""
    user = g.api_user
    return answer(
        Me(
            id=user.id,
            email=user.email,
            role=user.role,
            teams=[TeamOut(id=t.id, name=t.name) for t in access.teams_of(db.session, user=user)],
        )
    )
