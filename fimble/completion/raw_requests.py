"""Plans for requests whose prompt a client rendered: FIM (parsed back) or plain text.

A front door that receives a prompt string (HTTP) turns it into a ``RawPlan`` here and submits it
with ``Completer.submit_tokens``: ``build`` runs on the engine thread and makes the prompt token ids
with fimble's own layout (``build_prompt``); ``stop`` joins fimble's stop rules with the client's stop
strings and time/indent limits; ``final`` cleans the finished text; ``shown`` says what of the text
so far can already be sent to a streaming client without ever being taken back, in the form the
final text will have (the file's line ends): text a stop rule or the clean-up may still cut or move
is held until it is certain.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fimble.completion.context.imports import split_choices
from fimble.completion.engine import Engine, StopCheck
from fimble.completion.engine.guide import Guide, import_guide
from fimble.completion.output.postprocess import clean_completion, fit_line_start, may_reindent
from fimble.completion.output.shape import analyze, resolve_language, stop_context
from fimble.completion.output.stops import make_stop_check
from fimble.completion.prompt.fim import PREFIX_TOKENS, SUFFIX_TOKENS, FimPrompt, build_prompt
from fimble.completion.prompt.heal import INDENT_TOKENS, heal_guide, healed_stop, split_indent, unheal
from fimble.completion.prompt.raw_prompt import ContextFile, RawPrompt

__all__ = ["GenerationOptions", "RawPlan", "plan_request", "stop_string_hit", "stop_string_hold"]

_MARGIN = 8  # tokens kept free at the end of the context besides max_tokens


@dataclass(frozen=True)
class GenerationOptions:
    """What a client may ask for besides the prompt (validated by the front door)."""

    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    t_max_predict_ms: float | None = None  # llama.cpp: stop after this long once a newline exists
    n_indent: int = 0  # llama.cpp: stop at a new line indented less than this
    multiline: bool | None = None  # None: fimble decides from the cursor (FIM only)
    prefix_budget: int = PREFIX_TOKENS
    suffix_budget: int = SUFFIX_TOKENS


@dataclass(frozen=True)
class RawPlan:
    fim: bool
    build: Callable[[Engine], list[int] | FimPrompt]
    stop: StopCheck
    final: Callable[[str], str]
    shown: Callable[[str], str]  # a prefix of ``final`` of any text that extends this one
    max_tokens: int
    path: str | None = None
    context_files: int = 0
    multiline: bool | None = None
    info: dict[str, object] = field(default_factory=dict)  # filled by ``build``: truncated, files kept
    guide: Guide | None = None  # an import line's choices (``fimble.completion.engine.guide``)


def stop_string_hit(text: str, stops: Sequence[str]) -> tuple[str, int] | None:
    """The earliest client stop string in ``text``: stop there, keeping what precedes it."""
    best = -1
    for s in stops:
        if s:
            i = text.find(s)
            if i >= 0 and (best < 0 or i < best):
                best = i
    return ("stop_string", best) if best >= 0 else None


def stop_string_hold(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters might be the start of a stop string (not yet streamable)."""
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:k]):
                hold = k
                break
    return hold


def _time_limit(ms: float) -> StopCheck:
    """llama.cpp's ``t_max_predict_ms``: counted from the first token, binding once a line is done."""
    started: list[float] = []

    def check(text: str) -> tuple[str, int] | None:
        now = time.monotonic()
        if not started:
            started.append(now)
        if (now - started[0]) * 1000 > ms and "\n" in text:
            return "time_limit", len(text)
        return None

    return check


def _indent_limit(n_indent: int) -> StopCheck:
    """llama.cpp's ``n_indent``: a new line that starts less indented than the cursor ends it."""

    def check(text: str) -> tuple[str, int] | None:
        offset = text.find("\n") + 1
        if offset == 0:
            return None
        for line in text[offset:].split("\n"):
            stripped = line.lstrip(" \t")
            if stripped and len(line) - len(stripped) < n_indent:
                return "stop_rule:n_indent", offset - 1
            offset += len(line) + 1
        return None

    return check


def _combine(checks: Sequence[StopCheck]) -> StopCheck:
    def check(text: str) -> tuple[str, int] | None:
        hits = [hit for c in checks if (hit := c(text)) is not None]
        return min(hits, key=lambda h: h[1]) if hits else None

    return check


def _fit_files(engine: Engine, files: Sequence[ContextFile], budget: int) -> tuple[list[ContextFile], int]:
    """The last files that fit ``budget`` tokens (clients list the most relevant, newest last)."""
    kept: list[ContextFile] = []
    used = 0
    for f in reversed(files):
        n = len(engine.tokenize(f"{f[0]}\n{f[1]}\n")) + 1
        if used + n > budget:
            break
        kept.append(f)
        used += n
    return list(reversed(kept)), len(files) - len(kept)


def _plan_fim(raw: RawPrompt, opts: GenerationOptions, checks: list[StopCheck]) -> RawPlan:
    prefix, suffix = raw.prefix, raw.suffix
    syntax = analyze(prefix, suffix, resolve_language(None, raw.path), opts.multiline)
    multiline = syntax.multiline
    ctx = stop_context(prefix, suffix, syntax)
    stops = opts.stop
    rest = ctx.suffix.split("\n", 1)[0].rstrip()
    info: dict[str, object] = {}
    choices, raw_files = split_choices(raw.files)
    line_start, indent = split_indent(prefix)  # the model writes the cursor line's indentation

    def build(engine: Engine) -> FimPrompt:
        # Room for the prompt: the context less the answer, a margin and the few control/path tokens.
        room = max(64, engine.n_ctx - opts.max_tokens - _MARGIN - 64)
        prefix_budget, suffix_budget = opts.prefix_budget, opts.suffix_budget
        if prefix_budget + suffix_budget > room:  # a small context: keep the 3:1 split within it
            prefix_budget, suffix_budget = room * 3 // 4, room // 4
        files_budget = max(0, room - prefix_budget - suffix_budget)
        files, dropped = _fit_files(engine, raw_files, files_budget)
        info.update(files_used=len(files), files_dropped=dropped)
        pre, suf = line_start, suffix
        for _ in range(64):
            prompt = build_prompt(
                engine.tokenize,
                engine.fim,
                pre,
                suf,
                path=raw.path,
                repo=raw.repo,
                files=files,
                prefix_budget=prefix_budget,
                suffix_budget=suffix_budget,
                context_budget=files_budget,
            )
            if len(prompt) <= room + 64:
                return prompt
            # One huge line (minified code) defeats line-based budgets: halve the longer side.
            info["truncated"] = True
            if len(pre) >= len(suf):
                pre = pre[len(pre) // 2 :]
            else:
                suf = suf[: len(suf) // 2]
        return prompt

    def final(text: str) -> str:
        text = unheal(text, indent)
        hit = stop_string_hit(text, stops)
        return clean_completion(text[: hit[1]] if hit else text, ctx)

    def shown(text: str) -> str:
        text = unheal(text, indent).replace("\r\n", "\n")
        if may_reindent(ctx):
            # At a line start the clean-up may re-indent the suggestion, as its first line says: held
            # until that line is complete, and to the end when it does move (the rest follows it).
            first, newline, _ = text.partition("\n")
            if not newline or fit_line_start(first, ctx) != first:
                return ""
        # Multi-line: rules judge whole lines, so a line is final once the next one has started.
        if multiline and "\n" in text:
            safe = len(text[: text.rfind("\n")].rstrip())
        else:
            safe = len(text.rstrip())
            if not multiline and rest:  # trim_suffix_overlap may drop up to len(rest) at the end
                safe = max(0, safe - len(rest))
        safe = max(0, min(safe, len(text) - stop_string_hold(text, stops)))
        return text[:safe].replace("\n", ctx.newline)

    return RawPlan(
        fim=True,
        build=build,
        stop=healed_stop(_combine([make_stop_check(ctx), *checks]), indent),
        final=final,
        shown=shown,
        max_tokens=opts.max_tokens + (INDENT_TOKENS if indent else 0),
        path=raw.path,
        context_files=len(raw_files),
        multiline=multiline,
        info=info,
        guide=heal_guide(indent, import_guide(choices, prefix, suffix)),
    )


def _plan_text(raw: RawPrompt, opts: GenerationOptions, checks: list[StopCheck]) -> RawPlan:
    stops = opts.stop
    info: dict[str, object] = {}

    def build(engine: Engine) -> list[int]:
        # special=False: control-token text stays text. An empty prompt starts from a newline.
        tokens = engine.tokenize(raw.prefix) or engine.tokenize("\n")
        room = max(1, engine.n_ctx - opts.max_tokens - _MARGIN)
        info["truncated"] = len(tokens) > room
        return tokens[-room:] if len(tokens) > room else tokens

    def final(text: str) -> str:
        hit = stop_string_hit(text, stops)
        return text[: hit[1]] if hit else text

    def shown(text: str) -> str:
        return text[: len(text) - stop_string_hold(text, stops)]

    return RawPlan(
        fim=False,
        build=build,
        stop=_combine(checks),
        final=final,
        shown=shown,
        max_tokens=opts.max_tokens,
        info=info,
    )


def plan_request(raw: RawPrompt, opts: GenerationOptions) -> RawPlan:
    """The plan for one parsed client prompt."""
    checks: list[StopCheck] = []
    if opts.stop:
        stops = opts.stop
        checks.append(lambda text: stop_string_hit(text, stops))
    if opts.t_max_predict_ms is not None and opts.t_max_predict_ms > 0:
        checks.append(_time_limit(opts.t_max_predict_ms))
    if opts.n_indent > 0:
        checks.append(_indent_limit(opts.n_indent))
    return _plan_fim(raw, opts, checks) if raw.fim else _plan_text(raw, opts, checks)
