"""The API's OpenAPI 3.1 description, built from the routes, their ``@operation`` declarations and the webhook
payloads, and its docs page; both public (docs/architecture/views.md)."""

from __future__ import annotations

import re

from flask import Blueprint, Flask, current_app, jsonify, render_template
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from werkzeug.routing import Rule

from bulksign.core.schemas import NO_NUL
from bulksign.core.version import __version__
from bulksign.integrations import idempotency, webhook_delivery, webhook_events
from bulksign.people.auth import public
from bulksign.views.api.common import (
    DEFAULT_LIMIT,
    IDEMPOTENCY_KEY,
    MAX_BIG_ID,
    MAX_ID,
    REPLAYED_HEADER,
    ErrorResponse,
    Operation,
    PageQuery,
)

bp = Blueprint("api_docs", __name__, url_prefix="/api")

REF = "#/components/schemas/{model}"
#: What each error status means, for every operation that answers it.
ERROR_MEANINGS = {
    400: "The request is malformed: a parameter or field is missing or of the wrong type (`validation_failed`).",
    401: "No API key, or a revoked one (`Authorization: Bearer <key>`).",
    403: "Seen but not yours to change (a viewer's key, a batch of another team member).",
    404: "No such object, or out of the key's reach.",
    409: "The object's state does not allow this now, or a call with the same `Idempotency-Key` is still running.",
    410: "Gone for good: the request's documents and personal data were purged (retention or erasure, `purged`).",
    413: "The file is larger than the server's `MAX_UPLOAD_MB`.",
    415: "The body is not what the operation takes: a JSON body where it takes multipart/form-data (a file "
    "upload), or a file that is not a .csv or .xlsx file.",
    422: "Well-formed but refused: the content cannot be processed, a page cursor is not valid, or the "
    "`Idempotency-Key` was used for a different request (`idempotency_key_reused`).",
    429: "Over the key's rate limit (`API_RATE_LIMIT`); wait `Retry-After` seconds.",
    503: "A stored file cannot be read right now (the storage is unreachable); try again later.",
}
_ARGUMENT = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")
#: Path arguments of 64-bit ids; the others are of 32-bit ones (``reach.MAX_IDS``).
_BIG_IDS = {"request_id"}


def _api_rules(app: Flask) -> list[tuple[Rule, Operation | None]]:
    """Every ``/api/v1`` route with its declaration (None when a view has none: a test refuses that)."""
    return [
        (rule, getattr(app.view_functions[rule.endpoint], "api_operation", None))
        for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule)
        if rule.rule.startswith("/api/v1/") and rule.endpoint != "api_docs.openapi"
    ]


def _models(operations: list[Operation]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    found: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {
        (ErrorResponse, "serialization"): None,
        (webhook_events.Delivery, "serialization"): None,
    }
    for op in operations:
        # Query models are spelled out as parameters, not referenced.
        for model in (op.body, op.form):
            if model is not None:
                found[(model, "validation")] = None
        for answer in op.responses.values():
            if isinstance(answer, type):
                found[(answer, "serialization")] = None
    return list(found)


def _parameters(rule: Rule, op: Operation, schemas: dict) -> list[dict]:
    params = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": (
                {"type": "integer", "minimum": 1, "maximum": MAX_BIG_ID if name in _BIG_IDS else MAX_ID}
                if converter == "int"
                else {"type": "string", "pattern": NO_NUL}
            ),
        }
        for converter, name in _ARGUMENT.findall(rule.rule)
    ]
    if op.query is not None:
        schema = op.query.model_json_schema(ref_template=REF)
        for name, prop in schema["properties"].items():
            params.append(
                {
                    "name": name,
                    "in": "query",
                    "required": name in schema.get("required", ()),
                    "description": prop.pop("description", ""),
                    "schema": prop,
                }
            )
    if op.idempotent:
        params.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "pattern": f"^{IDEMPOTENCY_KEY.pattern}$"},
                "description": f"Any unique string (a UUID). A repeat with the same key within "
                f"{idempotency.TTL.total_seconds() / 3600:g} h gets the first answer again (with "
                f"`{REPLAYED_HEADER}: true`) instead of doing the work twice; the same key with "
                f"another request is refused (422). Keys are kept per API key.",
            }
        )
    return params


def _content(model, schemas: dict) -> dict:
    if isinstance(model, str):
        return {model: {"schema": {"type": "string"}}}
    if isinstance(model, tuple):  # a file of one of several types (a signer's attachment)
        return {media: {"schema": {"type": "string", "format": "binary"}} for media in model}
    return {"application/json": {"schema": schemas[(model, "serialization")]}}


def _operation(rule: Rule, method: str, op: Operation, schemas: dict, public_view: bool) -> dict:
    spec: dict = {
        "operationId": rule.endpoint.replace(".", "_"),
        "summary": op.summary,
        "tags": [op.tag],
        "parameters": _parameters(rule, op, schemas),
        "responses": {},
    }
    if op.description:
        spec["description"] = op.description
    content = {}
    if op.body is not None:
        content["application/json"] = {"schema": schemas[(op.body, "validation")]}
    if op.form is not None:
        file_types = getattr(
            op.form,
            "FILE_CONTENT_TYPES",
            "text/csv, application/vnd.openxmlformats-officedocument.spreadsheetml.sheet, application/octet-stream",
        )
        content["multipart/form-data"] = {
            "schema": schemas[(op.form, "validation")],
            "encoding": {"file": {"contentType": file_types}},
        }
    if content:
        spec["requestBody"] = {"required": op.form is not None or not op.body_optional, "content": content}
    for status, model in op.responses.items():
        spec["responses"][str(status)] = {"description": op.summary, "content": _content(model, schemas)}
        links = op.links.get(status)
        if links:
            spec["responses"][str(status)]["links"] = {
                name: {"operationId": link.endpoint.replace(".", "_"), "parameters": link.parameters}
                for name, link in links.items()
            }
    errors = set(op.errors)
    if not public_view:
        errors |= {401, 429}
    if op.idempotent:
        errors |= {400, 409, 422}
    if op.query is not None and issubclass(op.query, PageQuery):
        errors |= {422}  # a cursor this list did not hand out
    for status in sorted(errors):
        spec["responses"][str(status)] = {"$ref": f"#/components/responses/Error{status}"}
    if public_view:
        spec["security"] = []
    return spec


def _error_responses() -> dict:
    responses = {}
    for status, meaning in ERROR_MEANINGS.items():
        responses[f"Error{status}"] = {
            "description": meaning,
            "content": {"application/json": {"schema": {"$ref": REF.format(model="ErrorResponse")}}},
        }
    responses["Error429"]["headers"] = {
        "Retry-After": {
            "description": "Seconds until the key may call again.",
            "required": True,
            "schema": {"type": "integer"},
        }
    }
    return responses


def _webhooks(schemas: dict) -> dict:
    delivery = schemas[(webhook_events.Delivery, "serialization")]
    hooks = {}
    for event in webhook_events.EVENTS:
        hooks[event] = {
            "post": {
                "summary": f"`{event}`",
                "tags": ["Webhooks"],
                "security": [],
                "description": f"{webhook_events.EVENT_MEANINGS[event]} "
                f"POSTed to each endpoint subscribed to `{event}` (set up at /admin/webhooks). Answer "
                f"2xx within {webhook_delivery.TIMEOUT_SECONDS} s; anything else is retried with backoff, "
                f"up to {webhook_delivery.MAX_ATTEMPTS} tries. Check the signature before trusting the body.",
                "parameters": [
                    {
                        "name": webhook_delivery.SIGNATURE_HEADER,
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
                        "description": "`sha256=` + hex HMAC-SHA256 of the raw body, keyed with the endpoint's secret. "
                        "Compare in constant time (`hmac.compare_digest`).",
                    },
                    {"name": "X-Bulksign-Event", "in": "header", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "X-Bulksign-Delivery",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "The delivery's id: the same on every retry, to drop duplicates.",
                    },
                ],
                "requestBody": {"required": True, "content": {"application/json": {"schema": delivery}}},
                "responses": {"2XX": {"description": "Received; any other answer is retried."}},
            }
        }
    return hooks


def build_spec(app: Flask) -> dict:
    """The OpenAPI 3.1 document of every ``/api/v1`` operation of ``app``."""
    rules = [(rule, op) for rule, op in _api_rules(app) if op is not None]
    schemas_by_model, definitions = models_json_schema(_models([op for _, op in rules]), ref_template=REF)
    paths: dict = {}
    for rule, op in rules:
        path = _ARGUMENT.sub(r"{\2}", rule.rule.removeprefix("/api/v1"))
        public_view = getattr(app.view_functions[rule.endpoint], "_bulksign_public", False)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            paths.setdefault(path, {})[method.lower()] = _operation(rule, method, op, schemas_by_model, public_view)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Bulksign API",
            "version": __version__,
            "description": (
                "Send personalised documents for e-signature in bulk and follow each to the end.\n\n"
                "Every call but this description needs `Authorization: Bearer <API key>` (`flask users "
                'create-api-key`, or an admin at /admin/). Errors are always `{"error": {"code", "message", '
                '"details"}}`. Lists are keyset-paged the same way: `limit` (1–500, default '
                f"{DEFAULT_LIMIT}) and `cursor`; pass each answer's `next_cursor` back until it is null. Calls that "
                "create something take `Idempotency-Key`. Each key has a rate limit (`API_RATE_LIMIT`): past it the "
                "answer is 429 with `Retry-After`."
            ),
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "webhooks": _webhooks(schemas_by_model),
        "components": {
            "schemas": definitions.get("$defs", {}),
            "responses": _error_responses(),
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key of a user; it acts with that user's rights (teams, role).",
                }
            },
        },
    }


@bp.get("/v1/openapi.json")
@public
def openapi():
    app = current_app
    if "bulksign_openapi" not in app.extensions:
        app.extensions["bulksign_openapi"] = build_spec(app)
    return jsonify(app.extensions["bulksign_openapi"])


@bp.get("/docs")
@public
def docs():
    return render_template("api/docs.html")
