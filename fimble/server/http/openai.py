"""OpenAI-compatible routes: ``POST /v1/completions`` (with ``suffix`` for FIM) and ``GET /v1/models``.

Continue's ``openai`` provider (legacy completions endpoint) sends the prompt rendered in the model's
FIM format; the OpenAI client sends ``prompt`` and ``suffix``. Both become a ``RawPrompt``; streaming
is SSE ``data: {...}`` chunks with ``choices[0].text`` ending with ``data: [DONE]``. The engine decodes
greedily, so ``temperature`` and ``top_p`` are accepted and have no effect.

``prompt`` may be a list and ``n`` above 1 (batch clients): the answer has one choice per (prompt,
copy) with OpenAI's ``index = prompt_i * n + j``. Streaming takes one prompt and ``n`` = 1 only (a 400
otherwise): interleaved per-choice chunks help no editor, and a batch client does not stream.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from fimble.completion.prompt.raw_prompt import parse_prompt
from fimble.completion.raw_requests import GenerationOptions, RawPlan, plan_request
from fimble.errors import Cancelled
from fimble.server.http.body import MAX_PROMPTS, Field, HttpError
from fimble.server.http.context import AppContext, Endpoint, error_body, sse, sse_schema
from fimble.server.http.runner import Finished

__all__ = ["ENDPOINTS"]

COMPLETION_FIELDS = (
    Field("model", "string", "Any name; this server serves one model."),
    Field(
        "prompt",
        "prompts",
        "Plain text, or a prompt rendered in the model's FIM format; a list of them answers each "
        f"(at most {MAX_PROMPTS}, not streamed).",
    ),
    Field("suffix", "string", "Text after the cursor; makes the request fill-in-the-middle."),
    Field("max_tokens", "integer", "Most tokens to generate (capped by the server).", minimum=0),
    Field("temperature", "number", "Accepted; decoding is greedy.", minimum=0),
    Field("top_p", "number", "Accepted; decoding is greedy.", minimum=0),
    Field("stop", "stop", "Up to any number of stop strings."),
    Field("stream", "boolean", "Stream SSE chunks ending with [DONE]."),
    Field(
        "n",
        "integer",
        f"Choices per prompt (prompts × n at most {MAX_PROMPTS}); decoding is greedy, so they are copies.",
        minimum=1,
        maximum=MAX_PROMPTS,
    ),
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


def _choice(text: str, index: int, finish: str | None) -> dict[str, Any]:
    return {"text": text, "index": index, "logprobs": None, "finish_reason": finish}


def _chunk(cid: str, created: int, model: str, text: str, finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [_choice(text, 0, finish)],
    }


def _check_batch(prompts: str | tuple[str, ...], n: int, stream: bool) -> None:
    """A 400 for a batch that is too large or asks to stream, before any prompt is planned."""
    count = 1 if isinstance(prompts, str) else len(prompts)
    if count * n > MAX_PROMPTS:
        raise HttpError(400, f"{count} prompts × n={n} is {count * n} choices; at most {MAX_PROMPTS}")
    if stream and count * n > 1:
        raise HttpError(400, "streaming takes one prompt and n=1; send a list or n>1 without stream")


async def _plan(ctx: AppContext, body: dict[str, Any], prompt: str) -> RawPlan:
    """One prompt's plan, exactly as a single-prompt request makes it (context, stops, clean-up)."""
    raw = await ctx.with_repository_context(parse_prompt(prompt, body.get("suffix")))
    opts = GenerationOptions(max_tokens=ctx.max_tokens(body.get("max_tokens", 16)), stop=body.get("stop", ()))
    return plan_request(raw, opts)


async def completions(request: Request, ctx: AppContext) -> Response:
    body = await ctx.body(request, COMPLETION_FIELDS)
    prompts = body.get("prompt", "")
    n = body.get("n", 1)
    stream = body.get("stream", False)
    _check_batch(prompts, n, stream)
    cid = f"cmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())
    model = ctx.model_name
    if not stream:
        # Decoding is greedy, so the n choices of one prompt are identical: each prompt is
        # generated once and its answer repeated n times (usage counts every choice, as OpenAI's).
        if isinstance(prompts, str):  # a single prompt keeps the editor's priority (REQUEST)
            results = [await ctx.runner.run(request, await _plan(ctx, body, prompts))]
        else:
            results = await ctx.runner.run_all(request, [await _plan(ctx, body, p) for p in prompts])
        out = _chunk(cid, created, model, "", None)
        out["choices"] = [
            _choice(done.text, i * n + j, done.finish_reason)
            for i, done in enumerate(results)
            for j in range(n)
        ]
        usages = [_usage(done) for done in results]
        prompt_tokens = sum(u["prompt_tokens"] for u in usages)
        completion_tokens = n * sum(u["completion_tokens"] for u in usages)
        out["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        return JSONResponse(out)
    assert isinstance(prompts, str)  # _check_batch refused a streamed list
    plan = await _plan(ctx, body, prompts)
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
        completes=True,
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
