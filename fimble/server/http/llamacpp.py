"""llama.cpp-server-compatible routes: ``POST /completion`` and ``POST /infill``.

``/completion`` is what Continue's ``llama.cpp`` provider calls (a FIM-rendered prompt, SSE events with
``content``). ``/infill`` is what llama.vim and llama.vscode call: ``input_prefix``, ``prompt`` (the
cursor's line up to the cursor), ``input_suffix`` and ``input_extra`` chunks of other files. Their
``response_fields`` select flattened fields (``"timings/prompt_n"``) as llama-server does, and a
request with ``n_predict: 0`` only warms the KV cache with the extra context.

``/completion`` also takes an array of prompts (batch clients) and answers, as llama-server does, a
JSON array with one result per prompt; such a request cannot stream (a 400).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from fimble.completion.prompt.raw_prompt import RawPrompt, parse_prompt
from fimble.completion.raw_requests import GenerationOptions, RawPlan, plan_request
from fimble.errors import Cancelled
from fimble.server.http.body import MAX_PROMPTS, Field, HttpError
from fimble.server.http.context import AppContext, Endpoint, error_body, sse, sse_schema
from fimble.server.http.runner import Finished

__all__ = ["ENDPOINTS"]

_COMMON = (
    Field(
        "n_predict", "integer", "Most tokens to generate; -1: the server's cap; 0: only evaluate.", minimum=-1
    ),
    Field("stream", "boolean", "Stream SSE events with `content`."),
    Field("stop", "strings", "Stop strings."),
    Field("t_max_predict_ms", "number", "Stop after this long once a line is complete.", minimum=0),
    Field("t_max_prompt_ms", "number", "Accepted (llama-server ignores it too).", minimum=0),
    Field("n_indent", "integer", "Stop at a new line indented less than this.", minimum=0),
    Field("cache_prompt", "boolean", "Accepted; the KV cache is always reused."),
    Field("response_fields", "strings", "Only these (slash-separated) fields in the answer."),
    Field("temperature", "number", "Accepted; decoding is greedy."),
    Field("top_k", "integer", "Accepted; decoding is greedy."),
    Field("top_p", "number", "Accepted; decoding is greedy."),
)
COMPLETION_FIELDS = (
    Field(
        "prompt",
        "prompts",
        f"Plain text or a FIM-rendered prompt; an array of them (at most {MAX_PROMPTS}, not streamed) "
        "answers an array of results.",
    ),
    *_COMMON,
)
INFILL_FIELDS = (
    Field("input_prefix", "string", "File text before the cursor's line."),
    Field("input_suffix", "string", "File text after the cursor."),
    Field("input_extra", "extra", "Chunks of other files: [{filename, text}]."),
    Field("prompt", "string", "The cursor's line up to the cursor."),
    *_COMMON,
)

_TIMINGS = {
    "type": "object",
    "properties": {
        k: {"type": "number"}
        for k in (
            "prompt_n",
            "prompt_ms",
            "prompt_per_token_ms",
            "prompt_per_second",
            "predicted_n",
            "predicted_ms",
            "predicted_per_token_ms",
            "predicted_per_second",
        )
    },
}
RESULT_SCHEMA = {
    "type": "object",
    "description": "A llama-server result; with `response_fields`, only those (flattened) keys.",
    "properties": {
        "content": {"type": "string"},
        "stop": {"type": "boolean"},
        "model": {"type": "string"},
        "tokens_predicted": {"type": "integer"},
        "tokens_evaluated": {"type": "integer"},
        "tokens_cached": {"type": "integer"},
        "truncated": {"type": "boolean"},
        "stop_type": {"type": "string"},
        "stopping_word": {"type": "string"},
        "timings": _TIMINGS,
    },
}


def _stop_type(reason: str) -> str:
    if reason == "stop_string":
        return "word"
    if reason in ("max_tokens", "context_full", "time_limit"):
        return "limit"
    return "eos"


def _result(done: Finished, ctx: AppContext, content: str) -> dict[str, Any]:
    gen = done.generation
    n_pred = len(gen.tokens)
    prompt_ms, pred_ms = gen.prompt_ms, gen.generation_ms
    evaluated = max(gen.tokens_evaluated, 0)
    return {
        "content": content,
        "id_slot": 0,
        "stop": True,
        "model": ctx.model_name,
        "tokens_predicted": n_pred,
        "tokens_evaluated": gen.prompt_tokens,
        "tokens_cached": gen.prompt_tokens + n_pred,
        "truncated": bool(done.plan.info.get("truncated", False) or done.plan.info.get("files_dropped", 0)),
        "stop_type": _stop_type(gen.stop_reason),
        "stopping_word": "",
        "generation_settings": {"n_predict": done.plan.max_tokens, "model": ctx.model_name},
        "timings": {
            "prompt_n": evaluated,
            "prompt_ms": round(prompt_ms, 3),
            "prompt_per_token_ms": round(prompt_ms / evaluated, 3) if evaluated else 0.0,
            "prompt_per_second": round(evaluated / prompt_ms * 1000, 3) if prompt_ms > 0 else 0.0,
            "predicted_n": n_pred,
            "predicted_ms": round(pred_ms, 3),
            "predicted_per_token_ms": round(pred_ms / n_pred, 3) if n_pred else 0.0,
            "predicted_per_second": round(n_pred / pred_ms * 1000, 3) if pred_ms > 0 else 0.0,
        },
    }


def _select(result: dict[str, Any], fields: tuple[str, ...] | None) -> dict[str, Any]:
    """llama-server's ``response_fields``: the listed slash paths, as flat keys; unknown ones left out."""
    if not fields:
        return result
    out: dict[str, Any] = {}
    for path in fields:
        node: Any = result
        for key in path.split("/"):
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            if path:
                out[path] = node
    return out


def _options(ctx: AppContext, body: dict[str, Any]) -> GenerationOptions:
    return GenerationOptions(
        max_tokens=ctx.max_tokens(body.get("n_predict")),
        stop=body.get("stop", ()),
        t_max_predict_ms=body.get("t_max_predict_ms"),
        n_indent=body.get("n_indent", 0),
    )


async def _answer(request: Request, ctx: AppContext, body: dict[str, Any], plan: RawPlan) -> Response:
    fields = body.get("response_fields")
    if not body.get("stream", False):
        done = await ctx.runner.run(request, plan)
        return JSONResponse(_select(_result(done, ctx, done.text), fields))
    deltas = await ctx.runner.stream(request, plan)

    async def events() -> AsyncIterator[str]:
        try:
            async for item in deltas:
                if isinstance(item, str):
                    yield sse({"content": item, "stop": False, "id_slot": 0, "index": 0})
                else:
                    yield sse(_select(_result(item, ctx, ""), fields))
        except HttpError as err:
            yield sse(error_body("llamacpp", err.status, err.message, err.kind))
        except Cancelled:
            return

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def completion(request: Request, ctx: AppContext) -> Response:
    body = await ctx.body(request, COMPLETION_FIELDS)
    prompts = body.get("prompt", "")
    if isinstance(prompts, str):  # one prompt: the editor's path, streamed or not, at REQUEST priority
        raw = await ctx.with_repository_context(parse_prompt(prompts))
        return await _answer(request, ctx, body, plan_request(raw, _options(ctx, body)))
    if body.get("stream", False):
        raise HttpError(400, "an array of prompts cannot stream; send it without stream or one prompt")
    # Each prompt planned exactly as a single one, then decoded side by side in one BATCH job.
    plans = [
        plan_request(await ctx.with_repository_context(parse_prompt(p)), _options(ctx, body)) for p in prompts
    ]
    fields = body.get("response_fields")
    results = await ctx.runner.run_all(request, plans)
    return JSONResponse([_select(_result(done, ctx, done.text), fields) for done in results])


async def infill(request: Request, ctx: AppContext) -> Response:
    body = await ctx.body(request, INFILL_FIELDS)
    files = tuple((name, text, "llama.cpp input_extra") for name, text in body.get("input_extra", ()) if text)
    raw = RawPrompt(
        prefix=body.get("input_prefix", "") + body.get("prompt", ""),
        suffix=body.get("input_suffix", ""),
        fim=True,
        files=files,
    )
    raw = await ctx.with_repository_context(raw)
    return await _answer(request, ctx, body, plan_request(raw, _options(ctx, body)))


_RESPONSES = {
    "200": {
        "description": "The result, or SSE events with `content` when `stream` is true",
        "content": {
            "application/json": {"schema": RESULT_SCHEMA},
            "text/event-stream": {"schema": sse_schema(RESULT_SCHEMA, "llamacpp")},
        },
    }
}
_COMPLETION_RESPONSES = {
    "200": {
        "description": "The result (an array of them for an array of prompts), or SSE events with "
        "`content` when `stream` is true",
        "content": {
            "application/json": {
                "schema": {"anyOf": [RESULT_SCHEMA, {"type": "array", "items": RESULT_SCHEMA}]}
            },
            "text/event-stream": {"schema": sse_schema(RESULT_SCHEMA, "llamacpp")},
        },
    }
}

ENDPOINTS = (
    Endpoint(
        "/completion",
        "POST",
        completion,
        "llamacpp",
        "llama-server completion (Continue's llama.cpp provider)",
        fields=COMPLETION_FIELDS,
        responses=_COMPLETION_RESPONSES,
        completes=True,
        tag="llama.cpp",
    ),
    Endpoint(
        "/infill",
        "POST",
        infill,
        "llamacpp",
        "llama-server infill (llama.vim, llama.vscode)",
        fields=INFILL_FIELDS,
        responses=_RESPONSES,
        completes=True,
        tag="llama.cpp",
    ),
)
