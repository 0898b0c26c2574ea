"""What every route shares: the app context, the endpoint description, and error shapes per API family.

Each API family answers errors the way its clients parse them: OpenAI ``{"error": {"message",
"type", ...}}``, llama.cpp ``{"error": {"code", "message", "type"}}``, Ollama ``{"error": "..."}``.
An ``Endpoint`` carries its handler and its OpenAPI description together, so the served schema cannot
drift from the routes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fimble.completion.completer import Completer
from fimble.completion.prompt.raw_prompt import RawPrompt
from fimble.errors import Cancelled
from fimble.indexer.ignore import is_secret_name
from fimble.server.http.body import Field, HttpError, parse_fields, read_json
from fimble.server.http.metrics import Metrics
from fimble.server.http.runner import Runner
from fimble.server.http.settings import HttpSettings

__all__ = [
    "AppContext",
    "Endpoint",
    "error_body",
    "error_response",
    "error_schema",
    "sse",
    "sse_schema",
    "wrap",
]

log = logging.getLogger(__name__)

Handler = Callable[[Request, "AppContext"], Awaitable[Response]]


class ContextSource(Protocol):
    """fimble's workspace index as the server sees it (``fimble.server.index_runner.IndexRunner``)."""

    async def context_for(
        self, path: str | None, prefix: str, suffix: str, timeout: float
    ) -> Sequence[tuple[str, str, str]]:
        """Snippets (path, text, reason) from other files, best last; () when slow or failing."""
        ...


@dataclass
class AppContext:
    completer: Completer
    settings: HttpSettings
    runner: Runner
    metrics: Metrics
    index: ContextSource | None = None
    started: float = field(default_factory=time.time)

    @property
    def model_name(self) -> str:
        """The one model this server serves, by the name clients should configure."""
        if self.settings.model_name:
            return self.settings.model_name
        model = self.completer.model
        if model:
            return Path(model).stem if model.endswith(".gguf") else model
        from fimble.models import registry

        return registry.default_name()

    @property
    def model_path(self) -> Path | None:
        engine = self.completer.worker.engine
        return getattr(engine, "model_path", None)

    @property
    def fim_family(self) -> str | None:
        engine = self.completer.worker.engine
        return engine.fim.family if engine is not None else None

    @property
    def cpu_path(self) -> str | None:
        """The CPU path the engine runs on (``fimble.models.cpu_path``); None for a remote backend."""
        verdict = getattr(self.completer.worker.engine, "cpu", None)
        return str(verdict.path) if verdict is not None else None

    def max_tokens(self, requested: int | None) -> int:
        """The client's limit within the server's cap; None or negative (unlimited) means the cap."""
        if requested is None:
            return min(self.settings.default_max_tokens, self.settings.max_tokens_cap)
        if requested < 0:
            return self.settings.max_tokens_cap
        return min(requested, self.settings.max_tokens_cap)

    async def body(self, request: Request, fields: tuple[Field, ...]) -> dict[str, Any]:
        return parse_fields(await read_json(request, self.settings.max_body_bytes), fields)

    def refuse_secret(self, raw: RawPrompt) -> None:
        """403 for a prompt whose file is on the secrets list (``.env``, keys, credentials): fimble
        completes there through no front door, so its text reaches no cache or saved KV state."""
        if raw.path is None:
            return
        check = getattr(self.index, "is_secret", None)
        if check(raw.path) if check is not None else is_secret_name(raw.path):
            raise HttpError(
                403,
                f"{raw.path} is on fimble's secrets list (.env, keys, credentials): no completions there",
                kind="secret_file",
            )

    async def with_repository_context(self, raw: RawPrompt) -> RawPrompt:
        """Add fimble's own snippets for the cursor after what the client sent: when the context
        budget is short the client's are kept, and laid out (best last) they sit nearest the file.
        Failed or slow retrieval adds nothing. A prompt for a secret file is refused (403)."""
        self.refuse_secret(raw)
        if self.index is None or not raw.fim:
            return raw
        try:
            found = await self.index.context_for(
                raw.path, raw.prefix, raw.suffix, self.settings.context_timeout_s
            )
        except Exception:
            log.exception("repository context failed; completing with the client's context only")
            return raw
        seen = {(p, t) for p, t, _ in raw.files}
        extra = tuple(f for f in found if (f[0], f[1]) not in seen)
        return dataclasses.replace(raw, files=raw.files + extra) if extra else raw


@dataclass(frozen=True)
class Endpoint:
    path: str
    method: str
    handler: Handler
    style: str  # openai | llamacpp | ollama
    summary: str
    fields: tuple[Field, ...] | None = None  # the JSON body, if any
    body_schema: dict[str, Any] | None = None  # overrides the schema generated from ``fields``
    responses: dict[str, Any] = field(default_factory=dict)  # OpenAPI responses besides errors
    errors: tuple[int, ...] = (400, 403, 413, 422, 429, 503)
    public: bool = False  # reachable without the API key
    completes: bool = False  # a POST runs the model: batch and idle work make way as it arrives
    tag: str = ""


def error_body(style: str, status: int, message: str, kind: str) -> dict[str, Any]:
    if style == "ollama":
        return {"error": message}
    if style == "llamacpp":
        return {"error": {"code": status, "message": message, "type": kind}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def error_response(style: str, err: HttpError) -> JSONResponse:
    return JSONResponse(error_body(style, err.status, err.message, err.kind), err.status, headers=err.headers)


def error_schema(style: str) -> dict[str, Any]:
    if style == "ollama":
        return {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}
    inner: dict[str, Any] = {
        "type": "object",
        "required": ["message", "type"],
        "properties": {"message": {"type": "string"}, "type": {"type": "string"}},
    }
    if style == "llamacpp":
        inner["required"] = ["code", "message", "type"]
        inner["properties"]["code"] = {"type": "integer"}
    return {"type": "object", "required": ["error"], "properties": {"error": inner}}


def sse_schema(event: dict[str, Any], style: str, done_marker: bool = False) -> dict[str, Any]:
    """The schema of each server-sent event: JSON ``data`` that is an event or an error, or ``[DONE]``."""
    payload = {"anyOf": [event, error_schema(style)]}
    data: dict[str, Any] = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": payload,
    }
    if done_marker:
        data = {"anyOf": [{"const": "[DONE]"}, data]}
    return {"type": "object", "required": ["data"], "properties": {"data": data}}


def sse(payload: Any) -> str:
    """One server-sent event carrying JSON (or the literal ``[DONE]``)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n"


def wrap(endpoint: Endpoint, ctx: AppContext) -> Callable[[Request], Awaitable[Response]]:
    """The Starlette endpoint: runs the handler and renders ``HttpError`` in the family's shape."""

    async def call(request: Request) -> Response:
        try:
            return await endpoint.handler(request, ctx)
        except HttpError as err:
            return error_response(endpoint.style, err)
        except Cancelled:
            # The client went away (nobody reads this) or the server is shutting down.
            return error_response(
                endpoint.style, HttpError(503, "the request was cancelled", kind="cancelled")
            )

    return call
