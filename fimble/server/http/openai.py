"""OpenAI-compatible routes: ``POST /v1/completions`` (with ``suffix`` for FIM) and ``GET /v1/models``.

Continue's ``openai`` provider (legacy completions endpoint) sends the prompt rendered in the model's
FIM format; the OpenAI client sends ``prompt`` and ``suffix``. Both become a ``RawPrompt``; streaming
is SSE ``data: {...}`` chunks with ``choices[0].text`` ending with ``data: [DONE]``. The engine decodes
greedily, so ``temperature`` and ``top_p`` are accepted and have no effect.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from fimble.completion.prompt.raw_prompt import parse_prompt
from fimble.completion.raw_requests import GenerationOptions, plan_request
from fimble.errors import Cancelled
from fimble.server.http.body import Field, HttpError
from fimble.server.http.context import AppContext, Endpoint, error_body, sse, sse_schema
from fimble.server.http.runner import Finished

__all__ = ["ENDPOINTS"]

COMPLETION_FIELDS = (
    Field("model", "string", "Any name; this server serves one model."),
    Field("prompt", "prompt", "Plain text, or a prompt rendered in the model's FIM format."),
    Field("suffix", "string", "Text after the cursor; makes the request fill-in-the-middle."),
    Field("max_tokens", "integer", "Most tokens to generate (capped by the server).", minimum=0),
    Field("temperature", "number", "Accepted; decoding is greedy.", minimum=0),
    Field("top_p", "number", "Accepted; decoding is greedy.", minimum=0),
    Field("stop", "stop", "Up to any number of stop strings."),
    Field("stream", "boolean", "Stream SSE chunks ending with [DONE]."),
    Field("n", "integer", "Must be 1.", minimum=1, maximum=1),
    Field("stream_options", "object", "{include_usage: true} adds a final usage chunk."),
)

_USAGE = {
    "type": "object",
    "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
    "properties": {k: {"type": "integer"} for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
}
_CHOICE = {
    "type": "object",
    "required": ["text", "index", "finish_reason"],
    "properties": {
        "text": {"type": "string"},
        "index": {"type": "integer"},
        "logprobs": {"type": "null"},
        "finish_reason": {"type": ["string", "null"]},
    },
}
COMPLETION_SCHEMA = {
    "type": "object",
    "required": ["id", "object", "created", "model", "choices"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "text_completion"},
        "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {"type": "array", "items": _CHOICE},
        "usage": _USAGE,
    },
}
# A streamed chunk: one choice with a text delta, or no choice and the usage (include_usage).
CHUNK_SCHEMA = {
    **COMPLETION_SCHEMA,
    "properties": {
        **COMPLETION_SCHEMA["properties"],
        "choices": {"type": "array", "items": _CHOICE, "maxItems": 1},
    },
}
MODELS_SCHEMA = {
    "type": "object",
    "required": ["object", "data"],
    "properties": {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "object", "owned_by"],
                "properties": {
                    "id": {"type": "string"},
                    "object": {"const": "model"},
                    "created": {"type": "integer"},
                    "owned_by": {"type": "string"},
                },
            },
        },
    },
}


def _usage(done: Finished) -> dict[str, int]:
    gen = done.generation
    return {
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": len(gen.tokens),
        "total_tokens": gen.prompt_tokens + len(gen.tokens),
    }


def _chunk(cid: str, created: int, model: str, text: str, finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}],
    }


async def completions(request: Request, ctx: AppContext) -> Response:
    body = await ctx.body(request, COMPLETION_FIELDS)
    prompt = body.get("prompt", "")
    raw = await ctx.with_repository_context(parse_prompt(prompt, body.get("suffix")))
    opts = GenerationOptions(max_tokens=ctx.max_tokens(body.get("max_tokens", 16)), stop=body.get("stop", ()))
    plan = plan_request(raw, opts)
    cid = f"cmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())
    model = ctx.model_name
    if not body.get("stream", False):
        done = await ctx.runner.run(request, plan)
        out = _chunk(cid, created, model, done.text, done.finish_reason)
        out["usage"] = _usage(done)
        return JSONResponse(out)
    deltas = await ctx.runner.stream(request, plan)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    async def events() -> AsyncIterator[str]:
        try:
            async for item in deltas:
                if isinstance(item, str):
                    yield sse(_chunk(cid, created, model, item, None))
                    continue
                yield sse(_chunk(cid, created, model, "", item.finish_reason))
                if include_usage:
                    yield sse({**_chunk(cid, created, model, "", None), "choices": [], "usage": _usage(item)})
        except HttpError as err:
            yield sse(error_body("openai", err.status, err.message, err.kind))
        except Cancelled:
            return
        yield sse("[DONE]")

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def models(request: Request, ctx: AppContext) -> Response:
    item = {"id": ctx.model_name, "object": "model", "created": int(ctx.started), "owned_by": "fimble"}
    return JSONResponse({"object": "list", "data": [item]})


ENDPOINTS = (
    Endpoint(
        "/v1/completions",
        "POST",
        completions,
        "openai",
        "OpenAI text completion; FIM with `suffix` or a FIM-rendered prompt",
        fields=COMPLETION_FIELDS,
        responses={
            "200": {
                "description": "The completion, or SSE chunks when `stream` is true",
                "content": {
                    "application/json": {"schema": COMPLETION_SCHEMA},
                    "text/event-stream": {"schema": sse_schema(CHUNK_SCHEMA, "openai", done_marker=True)},
                },
            }
        },
        tag="OpenAI",
    ),
    Endpoint(
        "/v1/models",
        "GET",
        models,
        "openai",
        "The served model",
        responses={
            "200": {"description": "One model", "content": {"application/json": {"schema": MODELS_SCHEMA}}}
        },
        errors=(),
        tag="OpenAI",
    ),
)
