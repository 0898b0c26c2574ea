"""Run the evaluation: index the repository, mask lines, complete them through the real pipeline.

Per sample the index is given the masked document (as an editor buffer) before context is gathered,
so retrieval cannot find the hidden line itself; the file is restored afterwards. Context gathering
(``fimble.completion.context.gather``) and completion (``fimble.completion.service.complete``: FIM prompt,
engine with its KV cache, stops, post-processing) are the code the server runs. Context is gathered
once per sample and reused for every model, so models are compared on identical prompts.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fimble.completion.prompt.fim import CONTEXT_TOKENS, PREFIX_TOKENS, SUFFIX_TOKENS
from fimble.completion.report import generation_stats
from fimble.evaluation.crossfile import Resolver, classify, code_uses, not_named_above
from fimble.evaluation.metrics import first_line, score
from fimble.evaluation.samples import Sample, choose_samples, mask

if TYPE_CHECKING:
    from fimble.completion.engine import Engine
    from fimble.indexer import WorkspaceIndex

__all__ = [
    "EvalConfig",
    "Prepared",
    "choose",
    "classifier",
    "cross_file_names",
    "open_index",
    "prepare",
    "run_model",
]

Progress = Callable[[int], None]  # advance a progress bar by n
ContextFiles = tuple[tuple[str, str, str], ...]
Classify = Callable[[str, int, int], list[str]]  # (path, line, column) -> cross-file names


@dataclass(frozen=True)
class EvalConfig:
    """What to measure. Suggestions are single-line (the truth is the rest of one line)."""

    samples: int = 40
    seed: int = 0
    models: tuple[str, ...] = ("qwen2.5-coder-1.5b",)
    contexts: tuple[bool, ...] = (False, True)
    max_tokens: int = 48
    prefix_budget: int = PREFIX_TOKENS
    suffix_budget: int = SUFFIX_TOKENS
    context_budget: int = CONTEXT_TOKENS
    threads: int = 0
    cross_share: float = 0.5
    cross_unseen: bool = False  # a line is cross-file only for names the file does not show above it
    language: str = "auto"  # which files' lines are sampled (``sources.LANGUAGES``); auto: the most
    width: int = 1  # ceiling: requests decoded side by side in batch slots (1: one at a time)


@dataclass(frozen=True)
class Prepared:
    """A sample with the document the model sees and the context chunks chosen for it."""

    sample: Sample
    text: str
    offset: int
    chunks: ContextFiles = field(default=())
    context_ms: float = 0.0


def cross_file_names(line: str, column: int, resolver: Resolver) -> list[str]:
    """Names the code of ``line`` uses from ``column`` on that resolve, through the file's imports,
    to a definition in another workspace file (``fimble.evaluation.crossfile``)."""
    return classify(code_uses(line, column, resolver.language), resolver)


_HOPS = 3  # tests -> package __init__ -> module -> its base classes' module


_JS_FAMILY = frozenset({"javascript", "typescript", "tsx"})


def _js_module_binding(spec: str, window: str) -> list[str]:
    """What a JavaScript/TypeScript import without named bindings binds: ``import * as ns from
    'spec'`` and ``const ns = require('spec')`` bind ``ns``; a side-effect import or a re-export
    (``export * from``) binds nothing."""
    quoted = rf"""['"`]{re.escape(spec)}['"`]"""
    found = re.search(rf"\bimport\s+\*\s+as\s+([A-Za-z_$][\w$]*)\s+from\s+{quoted}", window) or re.search(
        rf"\b([A-Za-z_$][\w$]*)\s*=\s*(?:require|import)\(\s*{quoted}\s*\)", window
    )
    return [found.group(1)] if found else []


def _bound_names(imp: Any, lines: Sequence[str], language: str = "python") -> list[str]:
    """The names an import binds in the importing file (``a as b`` binds ``b``; ``import a.b``
    binds ``a``; in JavaScript/TypeScript ``import * as ns`` binds ``ns``)."""
    window = " ".join(lines[imp.line : imp.line + 30])
    if not imp.names and language in _JS_FAMILY:
        return _js_module_binding(imp.spec, window)
    out = []
    for name in imp.names or (imp.spec,):
        if not imp.names:
            alias = re.search(rf"\bimport\s+{re.escape(name)}\s+as\s+([A-Za-z_][A-Za-z0-9_]*)", window)
            out.append(alias.group(1) if alias else name.split(".")[0])
            continue
        alias = re.search(rf"\b{re.escape(name)}\s+as\s+([A-Za-z_][A-Za-z0-9_]*)", window)
        out.append(alias.group(1) if alias else name)
    return out


def _resolver_factory(index: WorkspaceIndex, texts: Mapping[str, str]) -> Callable[[str], Resolver]:
    """Per file: the names its imports bind and those reachable through them (``_HOPS`` levels of
    imports, so a package's re-exports and a class's base module count)."""
    imports: dict[str, tuple[Any, ...]] = {}
    defined: dict[str, frozenset[str]] = {}

    def imports_of(path: str) -> tuple[Any, ...]:
        if path not in imports:
            imports[path] = tuple(index.imports_of(path))
        return imports[path]

    def names_in(path: str) -> frozenset[str]:
        if path not in defined:
            defined[path] = frozenset(d.name for d in index.file_outline(path))
        return defined[path]

    def make(path: str) -> Resolver:
        from fimble.indexer.languages import detect_language

        language = detect_language(path)
        lines = texts.get(path, "").split("\n")
        bound: dict[str, tuple[str, ...]] = {}
        external: set[str] = set()
        frontier: list[str] = []
        for imp in imports_of(path):
            if not imp.targets:
                external.update(_bound_names(imp, lines, language))
                continue
            frontier.extend(imp.targets)
            if imp.names:  # ``import pkg`` binds a module, not a definition: ``pkg.name`` counts
                for name in _bound_names(imp, lines, language):
                    bound[name] = tuple(imp.targets)
        reach: set[str] = set()
        for _ in range(_HOPS):
            frontier = [t for t in dict.fromkeys(frontier) if t not in reach and t != path]
            reach.update(frontier)
            frontier = [t for f in frontier for imp in imports_of(f) for t in imp.targets]
        names: set[str] = set()
        for f in reach:
            names |= names_in(f)
        return Resolver(bound, names_in(path), names.__contains__, frozenset(external), language)

    return make


def classifier(index: WorkspaceIndex, files: Sequence[tuple[str, str]], config: EvalConfig) -> Classify:
    """``(path, line, column) -> names``: the names the line's code from ``column`` on takes from
    other workspace files (with ``config.cross_unseen``, only those the file does not spell out
    above the cursor). Reads the index while it is open; resolvers are made once per file."""
    texts = dict(files)
    resolvers: dict[str, Resolver] = {}
    make_resolver = _resolver_factory(index, texts)

    def names(path: str, line: int, column: int) -> list[str]:
        if path not in resolvers:
            resolvers[path] = make_resolver(path)
        lines = texts[path].split("\n")
        found = cross_file_names(lines[line], column, resolvers[path])
        if config.cross_unseen:  # CrossCodeEval's rule: only names the file cannot show the model
            found = not_named_above(found, "\n".join([*lines[:line], lines[line][:column]]))
        return found

    return names


def choose(index: WorkspaceIndex, files: Sequence[tuple[str, str]], config: EvalConfig) -> list[Sample]:
    """The samples of ``config`` (seeded; about ``cross_share`` of them cross-file lines), in file
    and line order. The same index, files and config give the same samples."""
    names = classifier(index, files, config)
    return choose_samples(
        files,
        config.samples,
        seed=config.seed,
        classify=lambda s: names(s.path, s.line, s.column),
        cross_share=config.cross_share,
    )


def prepare(
    index: WorkspaceIndex,
    files: Sequence[tuple[str, str]],
    config: EvalConfig,
    progress: Progress | None = None,
    samples: Sequence[Sample] | None = None,
) -> list[Prepared]:
    """Choose samples (``choose``, unless given) and gather each one's context with its masked line
    hidden from the index, and only that one: each file is restored from disk right after its
    sample (before, the masks of earlier samples stayed until the end, hiding up to 40 lines of
    other files from later samples' context), also on errors.
    The index must be built and writable."""
    from fimble.completion.context.gather import ContextGatherer

    root = index.root
    texts = dict(files)
    if samples is None:
        samples = choose(index, files, config)
    out: list[Prepared] = []
    masked: str | None = None  # the one file the index sees masked, restored after its sample
    try:
        for sample in samples:
            text, offset = mask(texts[sample.path], sample)
            masked = sample.path
            index.update_buffer(root / masked, text)
            index.flush()
            t0 = time.perf_counter()
            # The server's sticky gatherer, fresh per sample: each sample is a new cursor region.
            chunks = ContextGatherer(index).chunks(sample.path, text, sample.line)
            ms = (time.perf_counter() - t0) * 1000
            # Restored at once: the next sample's context must see this line in its file again.
            index.update_file(root / masked)
            masked = None
            out.append(Prepared(sample, text, offset, tuple(c.as_tuple() for c in chunks), round(ms, 1)))
            if progress:
                progress(1)
    finally:
        if masked is not None:
            index.update_file(root / masked)
        index.flush()
    return out


def _row(p: Prepared, model: str, with_context: bool, result: Any, elapsed_ms: float) -> dict[str, Any]:
    gen = result.generation
    s = p.sample
    prediction = first_line(result.text)
    sc = score(prediction, s.truth)
    latency = elapsed_ms + (p.context_ms if with_context else 0.0)
    return {
        "id": s.id,
        "path": s.path,
        "line": s.line,
        "column": s.column,
        "kind": s.kind,
        "cross_file": bool(s.cross_file),
        "cross_file_names": list(s.cross_file),
        "cross_file_unseen": not_named_above(s.cross_file, p.text[: p.offset]),
        "model": model,
        "context": with_context,
        "truth": s.truth,
        "prediction": prediction,
        "exact": sc.exact,
        "edit_similarity": sc.edit_similarity,
        "identifier_exact": sc.identifier_exact,
        "identifier_f1": sc.identifier_f1,
        "latency_ms": round(latency, 1),
        "context_ms": p.context_ms if with_context else 0.0,
        **generation_stats(gen),
        "context_tokens": sum(part.tokens for part in result.parts if part.kind == "context"),
        "chunks": [
            {"path": part.path, "reason": part.reason, "tokens": part.tokens}
            for part in result.parts
            if part.kind == "context"
        ],
    }


def _request(p: Prepared, with_context: bool, config: EvalConfig) -> Any:
    from fimble.completion.service import CompletionRequest

    return CompletionRequest(
        text=p.text,
        offset=p.offset,
        path=p.sample.path,
        max_tokens=config.max_tokens,
        multiline=False,
        context_files=p.chunks if with_context else (),
        prefix_budget=config.prefix_budget,
        suffix_budget=config.suffix_budget,
        context_budget=config.context_budget,
    )


# Samples handed to the engine at once per batch slot: more requests than slots, so that a slot
# whose line stopped is refilled at once and lines of one file can share their head (as in
# ``fimble.batch.runner.WINDOW``).
WINDOW = 8


def run_model(
    engine: Engine,
    model: str,
    prepared: Sequence[Prepared],
    config: EvalConfig,
    progress: Progress | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Complete every prepared sample with and/or without its context on one loaded model.

    Each sample runs with and without context back to back, so an interrupted run still compares
    them on the same lines. The prompts differ from their first context chunk on, so each evaluates
    about what a cursor arriving in a new region costs (``tokens_evaluated``; ``prompt_tokens`` is
    the whole prompt).

    With ``config.width`` > 1 (and an engine with batch slots) the samples' requests are decoded
    side by side, ``WINDOW`` × width at a time (``service.generate_together``): the same greedy
    answers, near-ties aside (each row counts its own), and rows still come in sample order, a
    window at a time. A row's latency is then its own share of a shared run (its prompt and its
    decoding, waiting for a slot not included), not what one request alone would take.
    """
    if config.width > 1 and getattr(engine, "batch_slots", None):
        return _run_together(engine, model, prepared, config, progress, on_row)
    from fimble.completion.service import complete

    rows: list[dict[str, Any]] = []
    for p in prepared:
        for with_context in config.contexts:
            t0 = time.perf_counter()
            result = complete(engine, _request(p, with_context, config))
            rows.append(_row(p, model, with_context, result, (time.perf_counter() - t0) * 1000))
            if on_row:
                on_row(rows[-1])
            if progress:
                progress(1)
    return rows


def _run_together(
    engine: Engine,
    model: str,
    prepared: Sequence[Prepared],
    config: EvalConfig,
    progress: Progress | None,
    on_row: Callable[[dict[str, Any]], None] | None,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    per_window = max(1, config.width * WINDOW // max(1, len(config.contexts)))
    for start in range(0, len(prepared), per_window):
        asked = [(p, c) for p in prepared[start : start + per_window] for c in config.contexts]
        for row in _answer_window(engine, model, asked, config, progress):  # in sample order
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


def _answer_window(
    engine: Engine,
    model: str,
    asked: Sequence[tuple[Prepared, bool]],
    config: EvalConfig,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    from fimble.completion.service import generate_together, plan

    plans = [plan(engine, _request(p, c, config)) for p, c in asked]
    rows: dict[int, dict[str, Any]] = {}

    def answered(i: int, result: Any) -> None:
        gen = result.generation
        p, with_context = asked[i]
        rows[i] = _row(p, model, with_context, result, gen.prompt_ms + gen.generation_ms)
        rows[i]["near_ties"] = len(getattr(gen, "near_ties", ()))
        if progress:
            progress(1)

    generate_together(engine, plans, answered)
    return [rows[i] for i in range(len(asked))]


def open_index(root: Path, progress: Callable[[int, int], None] | None = None) -> WorkspaceIndex:
    """The repository's index, built or brought up to date (writable: samples are masked in it).
    ``progress(files_done, files_total)`` follows the pass."""
    from fimble.indexer import WorkspaceIndex

    index = WorkspaceIndex.open(root)
    try:
        index.build(progress=(lambda p: progress(p.files_done, p.files_total)) if progress else None)
    except BaseException:
        index.close()
        raise
    return index
