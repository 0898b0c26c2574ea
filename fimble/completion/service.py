"""One completion, end to end: document + cursor -> FIM prompt -> engine -> cleaned suggestion.

Front doors (CLI, LSP, HTTP) build a ``CompletionRequest`` and call ``complete`` on the thread that
owns the engine (see ``fimble.completion.worker``); nothing here knows about LSP or HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fimble.completion.cancel import CancelToken
from fimble.completion.engine import Engine, Generation
from fimble.completion.fim import PREFIX_TOKENS, SUFFIX_TOKENS, build_prompt
from fimble.completion.guide import import_guide
from fimble.completion.imports import split_choices
from fimble.completion.postprocess import clean_completion
from fimble.completion.shape import analyze, resolve_language, stop_context
from fimble.completion.stops import make_stop_check

__all__ = ["CompletionRequest", "CompletionResult", "complete", "wants_multiline"]


@dataclass(frozen=True)
class CompletionRequest:
    """A cursor in a document. ``offset`` counts Python characters (code points) into ``text``."""

    text: str
    offset: int
    path: str | None = None
    language: str | None = None
    max_tokens: int = 64
    multiline: bool | None = None  # None: decide from the cursor's surroundings
    context_files: tuple[tuple[str, str, str], ...] = field(default=())  # (path, text, reason)
    prefix_budget: int = PREFIX_TOKENS
    suffix_budget: int = SUFFIX_TOKENS
    full_prompt: bool = False  # never a small first prompt, however cold (the user asked: they wait)

    @property
    def prefix(self) -> str:
        return self.text[: self.offset]

    @property
    def suffix(self) -> str:
        return self.text[self.offset :]


@dataclass(frozen=True)
class PartSummary:
    kind: str
    tokens: int
    reason: str
    path: str = ""


@dataclass(frozen=True)
class CompletionResult:
    text: str
    multiline: bool
    generation: Generation
    parts: tuple[PartSummary, ...]
    shape: str = ""  # why one line or a block: the syntax at the cursor, or the multiline setting
    # Answered from a small first prompt (a cold place: no repository context, a short window): shown,
    # but not the answer at this place for later requests, which the full prompt gives once warm.
    provisional: bool = False

    @property
    def stop_reason(self) -> str:
        return self.generation.stop_reason


def wants_multiline(prefix: str, suffix: str, language: str | None = None) -> bool:
    """One line or a block, from the syntax at the cursor (``fimble.completion.shape``).

    Mid-line the user is finishing an expression: one line is what they want and what is cheap.
    """
    return analyze(prefix, suffix, language).multiline


def complete(
    engine: Engine,
    request: CompletionRequest,
    cancel: CancelToken | None = None,
    on_text: Callable[[str], None] | None = None,
) -> CompletionResult:
    """Run one request on ``engine``; must be called from the engine's owning thread.

    ``on_text`` sees the raw text generated so far after each token (a request typed meanwhile may
    wait for this generation when it agrees with it)."""
    prefix, suffix = request.prefix, request.suffix
    choices, files = split_choices(request.context_files)
    syntax = analyze(prefix, suffix, resolve_language(request.language, request.path), request.multiline)
    multiline = syntax.multiline
    prompt = build_prompt(
        engine.tokenize,
        engine.fim,
        prefix,
        suffix,
        path=request.path,
        files=files,
        prefix_budget=request.prefix_budget,
        suffix_budget=request.suffix_budget,
    )
    if (warmer := getattr(engine, "warmer", None)) is not None:  # cold region: a small prompt first
        prompt = warmer.choose(
            engine,
            prompt,
            lambda prefix_budget, suffix_budget, context, start=None: build_prompt(
                engine.tokenize,
                engine.fim,
                prefix,
                suffix,
                path=request.path,
                files=files if context else (),
                prefix_budget=prefix_budget,
                suffix_budget=suffix_budget,
                prefix_start=start,
            ),
            prefix_budget=request.prefix_budget,
            suffix_budget=request.suffix_budget,
            key=request.path,
            small_ok=not request.full_prompt,
        )
    stop_ctx = stop_context(prefix, suffix, syntax)
    generation = engine.generate(
        prompt.tokens,
        max_tokens=request.max_tokens,
        stop=make_stop_check(stop_ctx),
        cancel=cancel,
        on_text=on_text,
        reuse_limit=prompt.stable_len,
        guide=import_guide(choices, prefix),
    )
    if warmer is not None:
        warmer.observe(generation)
    text = clean_completion(generation.text, stop_ctx)
    parts = tuple(PartSummary(p.kind, len(p.tokens), p.reason, p.path) for p in prompt.parts)
    return CompletionResult(
        text=text,
        multiline=multiline,
        generation=generation,
        parts=parts,
        shape=syntax.reason,
        provisional=warmer is not None and warmer.last_small,
    )
