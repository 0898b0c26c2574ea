"""One completion, end to end: document + cursor -> FIM prompt -> engine -> cleaned suggestion.

Front doors (CLI, LSP, HTTP) build a ``CompletionRequest`` and call ``complete`` on the thread that
owns the engine (see ``fimble.completion.worker``); nothing here knows about LSP or HTTP. ``complete``
is ``plan`` (the prompt as it will be evaluated) then ``generate``: the completer looks between the
two whether the very same small prompt was answered before. The worker's ``warmer``, when given,
picks a smaller first prompt at a cold place and learns this machine's speed from each generation.
"""

from __future__ import annotations

import dataclasses
import hashlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fimble.completion.context.imports import ImportChoices, split_choices
from fimble.completion.engine import Engine, Generation
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.guide import Guide, import_guide
from fimble.completion.output.postprocess import clean_completion
from fimble.completion.output.shape import CursorSyntax, analyze, resolve_language, stop_context
from fimble.completion.output.stops import StopContext, make_stop_check
from fimble.completion.prompt.fim import CONTEXT_TOKENS, PREFIX_TOKENS, SUFFIX_TOKENS, FimPrompt, build_prompt
from fimble.completion.prompt.heal import (
    INDENT_TOKENS,
    HealGuide,
    heal_guide,
    healed_on_text,
    healed_stop,
    split_indent,
    unheal,
)
from fimble.completion.tuning import Tuning

if TYPE_CHECKING:
    from fimble.completion.warmup import Warmer

__all__ = [
    "CompletionRequest",
    "CompletionResult",
    "Plan",
    "clean_for",
    "complete",
    "generate",
    "generate_together",
    "plan",
    "result_of",
    "shape_of",
]


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
    context_budget: int = CONTEXT_TOKENS  # other files' snippets
    full_prompt: bool = False  # never a smaller first prompt, however cold (the user asked: they wait)
    tuning: Tuning | None = None  # the requesting client's settings (None: the server's own)

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
    # Answered from a first prompt (a cold place: a smaller local window):
    # shown, but not the answer at this place for later requests, which the full prompt gives once warm.
    provisional: bool = False

    @property
    def stop_reason(self) -> str:
        return self.generation.stop_reason


def shape_of(request: CompletionRequest) -> CursorSyntax:
    """One line or a block, decided once per request: by tree-sitter where the language has a
    grammar, by the text heuristic otherwise, unless the request forces it (``multiline``).

    The completer decides before it keys the request, so the cache key, a generation others adopt
    and the result (``plan``) agree. Mid-line the user is finishing an expression: one line is
    what they want and what is cheap.
    """
    language = resolve_language(request.language, request.path)
    return analyze(request.prefix, request.suffix, language, request.multiline)


@dataclass(frozen=True)
class Plan:
    """A request's prompt as it will be evaluated, and what its decoding and clean-up need."""

    request: CompletionRequest
    prompt: FimPrompt
    syntax: CursorSyntax
    stop: StopContext
    choices: ImportChoices | None
    small: bool  # a first prompt at a cold place (smaller than the full one): its answer is provisional
    # The cursor line's indentation, left out of the prompt for the model to write (``prompt.heal``).
    indent: str = ""

    @property
    def digest(self) -> bytes:
        """The evaluated prompt's identity: the same small prompt gives the same greedy answer."""
        return hashlib.blake2b(array("i", self.prompt.tokens).tobytes(), digest_size=16).digest()


def plan(
    engine: Engine,
    request: CompletionRequest,
    syntax: CursorSyntax | None = None,
    *,
    warmer: Warmer | None = None,
) -> Plan:
    """Build the prompt ``request`` is answered from (``warmer`` may pick a smaller first prompt
    where the KV cache is cold); on the engine's owning thread. ``syntax``: the request's shape
    when already decided (``shape_of``), so the result keeps the shape its cache key was made with."""
    prefix, suffix = request.prefix, request.suffix
    choices, files = split_choices(request.context_files)
    if syntax is None:
        syntax = shape_of(request)
    prompt_prefix, indent = split_indent(prefix)
    prompt = build_prompt(
        engine.tokenize,
        engine.fim,
        prompt_prefix,
        suffix,
        path=request.path,
        files=files,
        prefix_budget=request.prefix_budget,
        suffix_budget=request.suffix_budget,
        context_budget=request.context_budget,
    )
    small = False
    if warmer is not None:  # cold region: a small prompt first
        prompt = warmer.choose(
            engine,
            prompt,
            lambda prefix_budget, suffix_budget, context_budget, start=None: build_prompt(
                engine.tokenize,
                engine.fim,
                prompt_prefix,
                suffix,
                path=request.path,
                files=files if context_budget > 0 else (),
                prefix_budget=prefix_budget,
                suffix_budget=suffix_budget,
                context_budget=context_budget,
                prefix_start=start,
            ),
            prefix_budget=request.prefix_budget,
            suffix_budget=request.suffix_budget,
            context_budget=request.context_budget,
            key=request.path,
            small_ok=not request.full_prompt,
            first=None if request.tuning is None else (request.tuning.first_ms, request.tuning.first_tokens),
        )
        small = warmer.last_small
    return Plan(request, prompt, syntax, stop_context(prefix, suffix, syntax), choices, small, indent)


def _guide(planned: Plan) -> Guide | None:
    """The guide ``planned`` decodes with: its import line's, behind its indentation's."""
    request = planned.request
    return heal_guide(planned.indent, import_guide(planned.choices, request.prefix, request.suffix))


def _max_tokens(planned: Plan) -> int:
    """The request's answer length, and the tokens its indentation takes to write."""
    return planned.request.max_tokens + (INDENT_TOKENS if planned.indent else 0)


def _unhealed(generation: Generation, planned: Plan, guide: Guide | None) -> Generation:
    """``generation`` as if the prompt had held the cursor's indentation: its text after it, and the
    import guide's outcome alone in ``guide``."""
    if not planned.indent:
        return generation
    inner = guide.inner if isinstance(guide, HealGuide) else guide
    return dataclasses.replace(
        generation,
        text=unheal(generation.text, planned.indent),
        guide="" if inner is None else ("released" if inner.released else "kept"),
    )


def generate(
    engine: Engine,
    planned: Plan,
    cancel: CancelToken | None = None,
    on_text: Callable[[str], None] | None = None,
    *,
    warmer: Warmer | None = None,
) -> CompletionResult:
    """Decode ``planned`` on ``engine`` (its owning thread) and clean the text up (``warmer`` is
    told how fast it went).

    ``on_text`` sees the raw text generated so far after each token (a request typed meanwhile may
    wait for this generation when it agrees with it)."""
    request, prompt = planned.request, planned.prompt
    # A client's choice, per request; left out when it is the engine's own (a remote engine has none).
    extra: dict[str, bool] = {}
    own = getattr(engine, "speculative", None)
    if request.tuning is not None and own is not None and request.tuning.speculative != own:
        extra["speculative"] = request.tuning.speculative
    guide = _guide(planned)
    generation = engine.generate(
        prompt.tokens,
        max_tokens=_max_tokens(planned),
        stop=healed_stop(make_stop_check(planned.stop), planned.indent),
        cancel=cancel,
        on_text=healed_on_text(on_text, planned.indent),
        reuse_limit=prompt.stable_len,
        guide=guide,
        **extra,
    )
    if warmer is not None:
        warmer.observe(generation)
    generation = _unhealed(generation, planned, guide)
    return result_of(planned, clean_completion(generation.text, planned.stop), generation)


def generate_together(
    engine: Engine, plans: Sequence[Plan], on_done: Callable[[int, CompletionResult], None]
) -> None:
    """``on_done(index, result)`` for every plan as it is answered: what ``generate`` gives each alone.

    For work nobody waits on line by line (an evaluation's places): the plans are decoded side by
    side in the engine's batch slots, so that one pass over the weights advances several of them,
    each with its own stop rules, ``max_tokens`` and import guide. Greedy, so equal to ``generate``
    except after a near-tie (``BatchGeneration.near_ties``: another batch shape rounds otherwise).
    On an engine without batch slots each plan is decoded alone."""
    if len(plans) < 2 or not getattr(engine, "batch_slots", None):
        for i, planned in enumerate(plans):
            on_done(i, generate(engine, planned))
        return

    guides = [_guide(p) for p in plans]

    def answered(i: int, generation: Generation) -> None:
        generation = _unhealed(generation, plans[i], guides[i])
        on_done(i, result_of(plans[i], clean_completion(generation.text, plans[i].stop), generation))

    limits = [_max_tokens(p) for p in plans]
    engine.generate_batch(
        [p.prompt.tokens for p in plans],
        max_tokens=max(limits),
        stops=[healed_stop(make_stop_check(p.stop), p.indent) for p in plans],
        limits=limits,
        on_done=answered,
        guides=guides,
    )


def result_of(planned: Plan, text: str, generation: Generation) -> CompletionResult:
    """The result of ``planned`` with ``text`` (generated now, or remembered for the same prompt)."""
    parts = tuple(PartSummary(p.kind, len(p.tokens), p.reason, p.path) for p in planned.prompt.parts)
    return CompletionResult(
        text=text,
        multiline=planned.syntax.multiline,
        generation=generation,
        parts=parts,
        shape=planned.syntax.reason,
        provisional=planned.small,
    )


def clean_for(request: CompletionRequest, text: str) -> str:
    """``text`` cleaned as a suggestion at ``request``'s cursor (lines taken from a generation that
    is still running, for a request that joined it)."""
    prefix, suffix = request.prefix, request.suffix
    language = resolve_language(request.language, request.path)
    return clean_completion(text, stop_context(prefix, suffix, analyze(prefix, suffix, language, True)))


def complete(
    engine: Engine,
    request: CompletionRequest,
    cancel: CancelToken | None = None,
    on_text: Callable[[str], None] | None = None,
    *,
    warmer: Warmer | None = None,
) -> CompletionResult:
    """Run one request on ``engine``; must be called from the engine's owning thread."""
    return generate(engine, plan(engine, request, warmer=warmer), cancel, on_text, warmer=warmer)
