"""Operational routes: ``GET /health``, ``GET /metrics`` (Prometheus text) and ``GET /`` (a banner).

``/health`` answers 200 once the model is loaded, 503 with ``Retry-After`` while it loads, and 503
with the fix when loading failed, so a supervisor or an editor can tell the three apart.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from fimble.server.http.context import AppContext, Endpoint

__all__ = ["ENDPOINTS"]

HEALTH_SCHEMA = {
    "type": "object",
    "required": ["status"],
    "properties": {
        "status": {"enum": ["ok", "loading", "error"]},
        "model": {"type": "string"},
        "fim_family": {"type": ["string", "null"]},
        "cpu_path": {
            "description": "how llama.cpp runs on this CPU: full, no-amx (AMX left out) or plain "
            "(no weight repacking); null for a remote backend",
            "enum": ["full", "no-amx", "plain", None],
        },
        "queue_depth": {"type": "integer"},
        "error": {"type": "string"},
    },
}


async def health(request: Request, ctx: AppContext) -> Response:
    worker = ctx.completer.worker
    body: dict[str, object] = {"model": ctx.model_name, "queue_depth": ctx.runner.gate.active}
    if not worker.ready.is_set():
        body["status"] = "loading"
        return JSONResponse(body, 503, headers={"Retry-After": str(ctx.settings.retry_after_s)})
    if worker.load_error is not None:
        return JSONResponse({**body, "status": "error", "error": str(worker.load_error)}, 503)
    return JSONResponse({**body, "status": "ok", "fim_family": ctx.fim_family, "cpu_path": ctx.cpu_path})


async def metrics(request: Request, ctx: AppContext) -> Response:
    return PlainTextResponse(ctx.metrics.render(), media_type="text/plain; version=0.0.4")


async def root(request: Request, ctx: AppContext) -> Response:
    return PlainTextResponse(
        "fimble is running (OpenAI, llama.cpp and Ollama compatible; see /openapi.json)\n"
    )


def _health_response(description: str) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": HEALTH_SCHEMA}}}


ENDPOINTS = (
    Endpoint(
        "/health",
        "GET",
        health,
        "openai",
        "Whether the model is loaded",
        responses={"200": _health_response("Ready"), "503": _health_response("Loading, or failed to load")},
        errors=(),
        public=True,
        tag="Operations",
    ),
    Endpoint(
        "/metrics",
        "GET",
        metrics,
        "openai",
        "Prometheus metrics",
        responses={
            "200": {
                "description": "Prometheus text format",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
        errors=(),
        tag="Operations",
    ),
    Endpoint(
        "/",
        "GET",
        root,
        "openai",
        "A banner (clients probe the root to find a server)",
        responses={
            "200": {"description": "Banner", "content": {"text/plain": {"schema": {"type": "string"}}}}
        },
        errors=(),
        public=True,
        tag="Operations",
    ),
)
