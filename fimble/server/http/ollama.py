"""Ollama-compatible routes: ``/api/tags``, ``/api/show``, ``/api/generate`` and ``/api/version``.

Continue's ``ollama`` provider decides whether a model can fill in the middle by looking for
``.Suffix`` in the template ``/api/show`` returns; ours has it, so Continue sends the raw prefix and
suffix (``prompt`` + ``suffix``) and fimble lays out the prompt itself. ``/api/generate`` streams
NDJSON by default, as Ollama does. Any model name is accepted: the server serves one model.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from fimble.completion.prompt.raw_prompt import parse_prompt
from fimble.completion.raw_requests import GenerationOptions, plan_request
from fimble.errors import Cancelled
from fimble.models.fim_tokens import families
from fimble.server.http.body import Field, HttpError, object_schema, parse_fields
from fimble.server.http.context import AppContext, Endpoint, error_body, error_schema
from fimble.server.http.runner import Finished

__all__ = ["ENDPOINTS", "fim_template", "ollama_name"]

OPTION_FIELDS = (
    Field("num_predict", "integer", "Most tokens; -1 or -2: the server's cap.", minimum=-2),
    Field("stop", "stop", "Stop strings."),
    Field("temperature", "number", "Accepted; decoding is greedy."),
    Field("top_p", "number", "Accepted; decoding is greedy."),
    Field("top_k", "integer", "Accepted; decoding is greedy."),
    Field("num_ctx", "integer", "Accepted; the server's context size applies."),
)
GENERATE_FIELDS = (
    Field("model", "string", "Any name; this server serves one model."),
    Field("prompt", "string", "The prefix (with `suffix`), a FIM-rendered prompt, or plain text."),
    Field("suffix", "string", "Text after the cursor."),
    Field("raw", "boolean", "Accepted; prompts are always parsed."),
    Field("stream", "boolean", "NDJSON lines (default true)."),
    Field("options", "object", "Model options: num_predict, stop, ..."),
    Field("keep_alive", "any", "Accepted; the model stays loaded."),
)
SHOW_FIELDS = (Field("model", "string", "Model name"), Field("name", "string", "Model name (older clients)"))

_DETAILS = {
    "type": "object",
    "properties": {
        "format": {"type": "string"},
        "family": {"type": "string"},
        "parameter_size": {"type": "string"},
        "quantization_level": {"type": "string"},
    },
}
TAGS_SCHEMA = {
    "type": "object",
    "required": ["models"],
    "properties": {
        "models": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "model"],
                "properties": {
                    "name": {"type": "string"},
                    "model": {"type": "string"},
                    "size": {"type": "integer"},
                    "digest": {"type": "string"},
                    "modified_at": {"type": "string"},
                    "details": _DETAILS,
                },
            },
        }
    },
}
SHOW_SCHEMA = {
    "type": "object",
    "required": ["template", "details"],
    "properties": {
        "template": {"type": "string"},
        "parameters": {"type": "string"},
        "modelfile": {"type": "string"},
        "details": _DETAILS,
        "capabilities": {"type": "array", "items": {"type": "string"}},
    },
}
GENERATE_SCHEMA = {
    "type": "object",
    "required": ["model", "created_at", "response", "done"],
    "properties": {
        "model": {"type": "string"},
        "created_at": {"type": "string"},
        "response": {"type": "string"},
        "done": {"type": "boolean"},
        "done_reason": {"type": "string"},
        "total_duration": {"type": "integer"},
        "prompt_eval_count": {"type": "integer"},
        "eval_count": {"type": "integer"},
    },
}


def ollama_name(name: str) -> str:
    """``qwen2.5-coder-1.5b`` -> ``qwen2.5-coder:1.5b`` (the tag Continue maps its model names to)."""
    m = re.match(r"^(.*)-(\d+(?:\.\d+)?[bBmM])$", name)
    return f"{m.group(1)}:{m.group(2).lower()}" if m else name


def fim_template(family: str | None) -> str:
    """An Ollama template with ``.Suffix`` in the family's FIM format (Qwen's when unknown yet)."""
    fams = families()
    fam = next((f for f in fams if f.name == family), None) or next(f for f in fams if f.name == "qwen")

    def first(role: str) -> str:
        return next(t for t in fam.spellings[role] if not t.startswith("▁"))

    return (
        f"{{{{- if .Suffix }}}}{first('prefix')}{{{{ .Prompt }}}}{first('suffix')}"
        f"{{{{ .Suffix }}}}{first('middle')}{{{{- else }}}}{{{{ .Prompt }}}}{{{{- end }}}}"
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _details(ctx: AppContext) -> dict[str, Any]:
    name = ctx.model_name
    size = re.search(r"(\d+(?:\.\d+)?)[bB]\b", name)
    family = ctx.fim_family or "qwen"
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family,
        "families": [family],
        "parameter_size": f"{size.group(1)}B" if size else "",
        "quantization_level": "Q4_K_M" if "q4_k_m" in str(ctx.model_path or "").lower() else "",
    }


async def tags(request: Request, ctx: AppContext) -> Response:
    path = ctx.model_path
    size = path.stat().st_size if path is not None and path.exists() else 0
    name = ollama_name(ctx.model_name)
    model = {
        "name": name,
        "model": name,
        "modified_at": datetime.fromtimestamp(ctx.started, UTC).isoformat().replace("+00:00", "Z"),
        "size": size,
        "digest": "",
        "details": _details(ctx),
    }
    return JSONResponse({"models": [model]})


async def show(request: Request, ctx: AppContext) -> Response:
    await ctx.body(request, SHOW_FIELDS)
    template = fim_template(ctx.fim_family)
    # Continue parses every `parameters` line as `key value`; keep them in that shape.
    parameters = f"num_ctx {ctx.completer.worker.engine.n_ctx if ctx.completer.worker.engine else 4096}"
    return JSONResponse(
        {
            "license": "",
            "modelfile": f"FROM {ctx.model_name}\nTEMPLATE {json.dumps(template)}\n",
            "parameters": parameters,
            "template": template,
            "details": _details(ctx),
            "model_info": {"general.architecture": "qwen2"} if ctx.fim_family == "qwen" else {},
            "capabilities": ["completion", "insert"],
        }
    )


async def version(request: Request, ctx: AppContext) -> Response:
    from fimble import __version__

    return JSONResponse({"version": "0.6.0", "fimble": __version__})


def _final(done: Finished, ctx: AppContext, response: str, started: float) -> dict[str, Any]:
    gen = done.generation
    return {
        "model": ctx.model_name,
        "created_at": _now(),
        "response": response,
        "done": True,
        "done_reason": "length" if done.finish_reason == "length" else "stop",
        "context": [],
        "total_duration": int((time.perf_counter() - started) * 1e9),
        "load_duration": 0,
        "prompt_eval_count": gen.tokens_evaluated,
        "prompt_eval_duration": int(gen.prompt_ms * 1e6),
        "eval_count": len(gen.tokens),
        "eval_duration": int(gen.generation_ms * 1e6),
    }


async def generate(request: Request, ctx: AppContext) -> Response:
    started = time.perf_counter()
    body = await ctx.body(request, GENERATE_FIELDS)
    options = parse_fields(body.get("options", {}), OPTION_FIELDS)
    prompt, suffix = body.get("prompt", ""), body.get("suffix")
    if not prompt and suffix is None:  # Ollama's way to (pre)load a model
        ctx.runner.check_ready()
        return JSONResponse(
            {
                "model": ctx.model_name,
                "created_at": _now(),
                "response": "",
                "done": True,
                "done_reason": "load",
            }
        )
    plan = plan_request(
        await ctx.with_repository_context(parse_prompt(prompt, suffix)),
        GenerationOptions(
            max_tokens=ctx.max_tokens(options.get("num_predict")), stop=options.get("stop", ())
        ),
    )
    if not body.get("stream", True):
        done = await ctx.runner.run(request, plan)
        return JSONResponse(_final(done, ctx, done.text, started))
    deltas = await ctx.runner.stream(request, plan)

    async def lines() -> AsyncIterator[str]:
        try:
            async for item in deltas:
                if isinstance(item, str):
                    line = {"model": ctx.model_name, "created_at": _now(), "response": item, "done": False}
                    yield json.dumps(line, ensure_ascii=False) + "\n"
                else:
                    yield json.dumps(_final(item, ctx, "", started), ensure_ascii=False) + "\n"
        except HttpError as err:
            yield json.dumps(error_body("ollama", err.status, err.message, err.kind)) + "\n"
        except Cancelled:
            return

    return StreamingResponse(lines(), media_type="application/x-ndjson")


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_GENERATE_BODY = object_schema(GENERATE_FIELDS)
_GENERATE_BODY["properties"]["options"] = {**object_schema(OPTION_FIELDS), "type": ["object", "null"]}

ENDPOINTS = (
    Endpoint(
        "/api/tags",
        "GET",
        tags,
        "ollama",
        "Ollama: the served model",
        responses={"200": _json(TAGS_SCHEMA, "One model")},
        errors=(),
        tag="Ollama",
    ),
    Endpoint(
        "/api/show",
        "POST",
        show,
        "ollama",
        "Ollama: model details, with a FIM template containing .Suffix",
        fields=SHOW_FIELDS,
        responses={"200": _json(SHOW_SCHEMA, "Model details")},
        errors=(400, 413, 422),
        tag="Ollama",
    ),
    Endpoint(
        "/api/generate",
        "POST",
        generate,
        "ollama",
        "Ollama: generate (prompt + suffix for FIM), NDJSON stream by default",
        fields=GENERATE_FIELDS,
        body_schema=_GENERATE_BODY,
        responses={
            "200": {
                "description": "The result, or NDJSON lines unless `stream` is false",
                "content": {
                    "application/json": {"schema": GENERATE_SCHEMA},
                    "application/x-ndjson": {"schema": {"anyOf": [GENERATE_SCHEMA, error_schema("ollama")]}},
                },
            }
        },
        completes=True,
        tag="Ollama",
    ),
    Endpoint(
        "/api/version",
        "GET",
        version,
        "ollama",
        "Ollama: version",
        responses={
            "200": _json(
                {"type": "object", "required": ["version"], "properties": {"version": {"type": "string"}}},
                "Version",
            )
        },
        errors=(),
        tag="Ollama",
    ),
)
