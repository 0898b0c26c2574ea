"""The Starlette application: routes of every API family, auth, CORS, metrics and error shapes.

``create_app`` takes the process's shared ``Completer`` so HTTP clients get the same model, KV cache
and statistics as the language server. Tests run it under uvicorn on an ephemeral port.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fimble.completion.completer import Completer
from fimble.server.http import health, llamacpp, ollama, openai
from fimble.server.http.context import AppContext, ContextSource, Endpoint, error_body, wrap
from fimble.server.http.metrics import Metrics, MetricsMiddleware
from fimble.server.http.openapi import openapi_document
from fimble.server.http.runner import Gate, MakeWay, Runner
from fimble.server.http.settings import HttpSettings

__all__ = ["ENDPOINTS", "create_app"]

log = logging.getLogger(__name__)

ENDPOINTS: tuple[Endpoint, ...] = (
    *openai.ENDPOINTS,
    *llamacpp.ENDPOINTS,
    *ollama.ENDPOINTS,
    *health.ENDPOINTS,
)
_PUBLIC_PATHS = {ep.path for ep in ENDPOINTS if ep.public} | {"/openapi.json"}


def _style_for(path: str) -> str:
    if path.startswith("/api/"):
        return "ollama"
    if path in ("/completion", "/infill"):
        return "llamacpp"
    return "openai"


class BearerAuth:
    """Requires ``Authorization: Bearer KEY`` (or ``X-Api-Key: KEY``), compared in constant time."""

    def __init__(self, app: Any, api_key: str) -> None:
        self.app = app
        self.key = api_key.encode()

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        auth = headers.get(b"authorization", b"")
        scheme, _, token = auth.partition(b" ")
        supplied = token.strip() if scheme.lower() == b"bearer" else headers.get(b"x-api-key", b"")
        return hmac.compare_digest(supplied, self.key)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in _PUBLIC_PATHS or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        if self._authorized(dict(scope["headers"])):
            await self.app(scope, receive, send)
            return
        style = _style_for(scope["path"])
        body = error_body(
            style, 401, "missing or wrong API key: send 'Authorization: Bearer KEY'", "authentication_error"
        )
        response = JSONResponse(body, 401, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


async def _http_error(request: Request, exc: Exception) -> Response:
    """404/405 and other routing errors, as JSON in the path's API shape."""
    assert isinstance(exc, HTTPException)
    style = _style_for(request.url.path)
    return JSONResponse(
        error_body(style, exc.status_code, str(exc.detail), "not_found"), exc.status_code, headers=exc.headers
    )


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error in %s %s", request.method, request.url.path, exc_info=exc)
    body = error_body(
        _style_for(request.url.path), 500, f"internal error: {exc}; see the server log", "server_error"
    )
    return JSONResponse(body, 500)


def create_app(
    completer: Completer,
    settings: HttpSettings | None = None,
    *,
    index: ContextSource | None = None,
    endpoints: Iterable[Endpoint] = ENDPOINTS,
) -> Starlette:
    """The HTTP front door over ``completer`` (which the caller owns and closes); ``index`` adds
    fimble's repository context to every FIM request."""
    settings = settings or HttpSettings()
    endpoints = tuple(endpoints)
    gate = Gate(settings.max_queue)
    runner = Runner(completer, gate, settings.retry_after_s)
    metrics = Metrics(completer, gate)
    runner.on_finished = metrics.observe_generation
    ctx = AppContext(completer=completer, settings=settings, runner=runner, metrics=metrics, index=index)
    schema = json.dumps(openapi_document(endpoints, secured=settings.api_key is not None))

    async def openapi_json(request: Request) -> Response:
        return Response(schema, media_type="application/json")

    routes = [Route(ep.path, wrap(ep, ctx), methods=[ep.method]) for ep in endpoints]
    routes.append(Route("/openapi.json", openapi_json, methods=["GET"], include_in_schema=False))
    middleware = []
    if settings.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["Authorization", "Content-Type", "X-Api-Key"],
            )
        )
    middleware.append(Middleware(MetricsMiddleware, metrics=metrics, routes=[ep.path for ep in endpoints]))
    if settings.api_key is not None:
        middleware.append(Middleware(BearerAuth, api_key=settings.api_key))
    completing = [ep.path for ep in endpoints if ep.completes]
    middleware.append(Middleware(MakeWay, completer=completer, routes=completing))  # after the key check
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.fimble = ctx
    return app
