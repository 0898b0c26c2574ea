"""Reading and validating JSON request bodies; the same field lists generate the OpenAPI schemas.

Clients send many fields fimble has no use for (sampling knobs of a greedy engine, llama.cpp slot
ids): unknown fields are accepted and ignored, ``null`` means "not given". A known field of the wrong
type is a 422 naming the field, an unreadable body a 400, an oversized one a 413 — never a 500.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

__all__ = ["MAX_PROMPTS", "Field", "HttpError", "object_schema", "parse_fields", "read_json"]

# Most prompts (and prompts x n choices) in one batch request: they run one after the other on the
# one model, so a larger batch belongs in several requests (or the batch pipeline), not one.
MAX_PROMPTS = 64


class HttpError(Exception):
    """An answer other than 200, rendered in the calling API's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.headers = headers or {}


@dataclass(frozen=True)
class Field:
    """One accepted body field.

    ``kind``: string, integer, number, boolean, stop (a string or a list of strings), strings (a list
    of strings), prompt (a string or a one-string list), prompts (a string, or a list of 1 to
    ``MAX_PROMPTS`` strings: a one-string list is the string, a longer one a tuple), extra (llama.cpp
    ``input_extra``: a list of ``{filename, text}``), object (any JSON object), any.
    """

    name: str
    kind: str
    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object, read to at most ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HttpError(413, f"request body of {declared} bytes is over the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpError(413, f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise HttpError(400, "the request body is empty; send a JSON object")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise HttpError(400, f"the request body is not valid JSON: {err}") from None
    if not isinstance(body, dict):
        raise HttpError(422, f"the request body must be a JSON object, not {type(body).__name__}")
    return body


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _check(field: Field, value: Any) -> Any:
    name, kind = field.name, field.kind
    if kind == "string":
        if not isinstance(value, str):
            raise HttpError(422, f"field {name!r} must be a string, got {_type_name(value)}")
    elif kind in ("integer", "number"):
        is_num = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not is_num or not math.isfinite(value):
            raise HttpError(422, f"field {name!r} must be a {kind}, got {_type_name(value)}")
        if kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                raise HttpError(422, f"field {name!r} must be an integer, got {value}")
            value = int(value)
        if field.minimum is not None and value < field.minimum:
            raise HttpError(422, f"field {name!r} must be at least {field.minimum:g}, got {value}")
        if field.maximum is not None and value > field.maximum:
            raise HttpError(422, f"field {name!r} must be at most {field.maximum:g}, got {value}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise HttpError(422, f"field {name!r} must be true or false, got {_type_name(value)}")
    elif kind in ("stop", "strings"):
        if kind == "stop" and isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise HttpError(422, f"field {name!r} must be a list of strings")
        return tuple(value)
    elif kind == "prompt":
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
            return value[0]
        if not isinstance(value, str):
            raise HttpError(
                422, f"field {name!r} must be a string (or a list of one string); token ids are not accepted"
            )
    elif kind == "prompts":
        return _prompts(name, value)
    elif kind == "extra":
        if not isinstance(value, list):
            raise HttpError(422, f"field {name!r} must be a list of {{filename, text}} objects")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, dict) or not isinstance(item.get("text", ""), str):
                raise HttpError(422, f"{name}[{i}] must be an object with a string 'text'")
            filename = item.get("filename")
            if filename is not None and not isinstance(filename, str):
                raise HttpError(422, f"{name}[{i}].filename must be a string")
            out.append((filename or "", item.get("text") or ""))
        return tuple(out)
    elif kind == "object" and not isinstance(value, dict):
        raise HttpError(422, f"field {name!r} must be an object, got {_type_name(value)}")
    return value


def _prompts(name: str, value: Any) -> str | tuple[str, ...]:
    """A string, or a batch of them. Malformed lists are 400 (as OpenAI and llama-server answer a
    bad prompt array), and the length is capped so one request cannot hold the model for long."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        raise HttpError(400, f"field {name!r} must be a string or a non-empty list of strings")
    if len(value) > MAX_PROMPTS:
        raise HttpError(400, f"field {name!r} has {len(value)} prompts; at most {MAX_PROMPTS} per request")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise HttpError(
                400, f"{name}[{i}] must be a string, got {_type_name(item)}; token ids are not accepted"
            )
    return value[0] if len(value) == 1 else tuple(value)


def parse_fields(body: dict[str, Any], fields: Sequence[Field]) -> dict[str, Any]:
    """Checked values of the known fields that are present and not null."""
    out: dict[str, Any] = {}
    for field in fields:
        value = body.get(field.name)
        if value is None:
            if field.required:
                raise HttpError(422, f"field {field.name!r} is required")
            continue
        out[field.name] = _check(field, value)
    return out


_STRINGS = {"type": "array", "items": {"type": "string"}}


def _schema(field: Field) -> dict[str, Any]:
    kind = field.kind
    if kind in ("string", "integer", "number", "boolean"):
        schema: dict[str, Any] = {"type": kind}
        if field.minimum is not None:
            schema["minimum"] = field.minimum
        if field.maximum is not None:
            schema["maximum"] = field.maximum
    elif kind == "stop":
        schema = {"anyOf": [{"type": "string"}, _STRINGS]}
    elif kind == "strings":
        schema = dict(_STRINGS)
    elif kind == "prompt":
        schema = {"anyOf": [{"type": "string"}, {**_STRINGS, "minItems": 1, "maxItems": 1}]}
    elif kind == "prompts":
        schema = {"anyOf": [{"type": "string"}, {**_STRINGS, "minItems": 1, "maxItems": MAX_PROMPTS}]}
    elif kind == "extra":
        item = {
            "type": "object",
            "properties": {"filename": {"type": "string"}, "text": {"type": "string"}},
        }
        schema = {"type": "array", "items": item}
    elif kind == "object":
        schema = {"type": "object"}
    else:
        schema = {}
    if field.description:
        schema["description"] = field.description
    if not field.required and schema:  # OpenAPI 3.1: null means "not given"
        if isinstance(schema.get("type"), str):
            schema["type"] = [schema["type"], "null"]
        elif "anyOf" in schema:
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
    return schema


def object_schema(fields: Sequence[Field]) -> dict[str, Any]:
    """An OpenAPI 3.1 schema for a body with these fields (others allowed and ignored)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f.name: _schema(f) for f in fields},
        "additionalProperties": True,
    }
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    return schema
