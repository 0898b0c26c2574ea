"""The OpenAPI 3.1 document served at ``/openapi.json``, generated from the ``Endpoint`` list.

Request schemas come from the same ``Field`` lists the handlers validate with, and every error status
a route can answer is documented with its family's error shape, so a schema-driven fuzzer
(schemathesis, in the tests) can check that every response conforms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fimble import __version__
from fimble.server.http.body import object_schema
from fimble.server.http.context import Endpoint, error_schema

__all__ = ["openapi_document"]

_ERROR_TEXT = {
    400: "Unreadable body (not JSON, empty)",
    401: "Missing or wrong bearer token",
    403: "The prompt names a file on the secrets list (.env, keys, credentials)",
    413: "Body over the size limit",
    422: "A field has the wrong type or value",
    429: "Too many completions queued; retry after Retry-After seconds",
    500: "The engine failed",
    502: "The remote inference backend is down, too slow or failed (the message says which)",
    503: "The model is loading (see Retry-After) or failed to load (the message says the fix)",
}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "string"}}}


def _operation(ep: Endpoint, secured: bool) -> dict[str, Any]:
    responses: dict[str, Any] = dict(ep.responses)
    statuses = set(ep.errors)
    if ep.fields is not None:
        statuses.update((500, 502))
    if secured and not ep.public:
        statuses.add(401)
    for status in sorted(statuses):
        key = str(status)
        if key in responses:
            continue
        response: dict[str, Any] = {
            "description": _ERROR_TEXT.get(status, "Error"),
            "content": {"application/json": {"schema": error_schema(ep.style)}},
        }
        if status in (429, 503):
            response["headers"] = _RETRY_AFTER
        responses[key] = response
    op: dict[str, Any] = {
        "summary": ep.summary,
        "operationId": f"{ep.method.lower()}_{ep.path.strip('/').replace('/', '_') or 'root'}",
        "responses": responses,
    }
    if ep.tag:
        op["tags"] = [ep.tag]
    if ep.fields is not None:
        schema = ep.body_schema if ep.body_schema is not None else object_schema(ep.fields)
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    if secured and not ep.public:
        op["security"] = [{"bearer": []}]
    return op


def openapi_document(endpoints: Sequence[Endpoint], secured: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for ep in endpoints:
        paths.setdefault(ep.path, {})[ep.method.lower()] = _operation(ep, secured)
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "fimble",
            "version": __version__,
            "description": "Offline code completion: OpenAI, llama.cpp and Ollama compatible endpoints.",
        },
        "paths": paths,
    }
    if secured:
        doc["components"] = {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}
    return doc
