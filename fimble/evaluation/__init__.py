"""`fimble eval`: measure completion quality and cost on real code, as served and at its ceiling.

Two ways to ask, on the same masked lines: ``served`` drives a real ``fimble serve`` process over LSP
(small first prompts, deadlines, caches and warm-up: what a user gets, per think time), ``ceiling``
completes in-process from the full prompt with and without repository context (what the model can
do once a region is warm). Only ``fimble.commands.eval`` imports this package; it sits beside the
server as another user of ``fimble.completion`` and ``fimble.indexer`` and never imports
``fimble.server`` (the served mode starts it as a process).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from fimble.errors import InputError
from fimble.evaluation.cases import Case, build_cases, case_record, revisit_plan
from fimble.evaluation.runner import EvalConfig
from fimble.evaluation.served import ServedSettings
from fimble.indexer.languages import detect_language

__all__ = ["MODES", "EvalConfig", "ServedSettings", "evaluate", "machine_info", "served_section"]


def machine_info(threads: int) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    from fimble.completion.engine import default_threads

    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "threads": threads or default_threads(),
        "python": platform.python_version(),
    }


MODES = ("served", "ceiling", "both")


def evaluate(
    config: EvalConfig,
    *,
    repo: Path | None = None,
    pypi: str | None = None,
    out: Path | None = None,
    mode: str = "ceiling",
    served: ServedSettings | None = None,
    server_budgets: dict[str, int] | None = None,
) -> tuple[dict[str, Any], tuple[Path, Path]]:
    """Index the source, choose ``config.samples`` lines, and measure them: ``ceiling`` completes
    each masked line in-process from its full prompt (per model and context setting), ``served``
    asks a real ``fimble serve`` at two positions per line (``fimble.evaluation.served``), ``both``
    does both on the same lines. Writes ``eval.json`` and ``eval.html`` (and, served, ``cases.jsonl``
    and ``served.jsonl``) into ``out``. Returns the report and the two paths.

    ``server_budgets`` are the prompt budgets the user set (``prefixTokens``/``suffixTokens``), sent
    to the server; without them it keeps its own defaults."""
    from tqdm import tqdm

    from fimble.evaluation.runner import choose, classifier, prepare
    from fimble.evaluation.sources import LANGUAGES, fetch_sdist, pick_language, source_files

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    started = time.time()
    load_at_start = _load_average()
    root = fetch_sdist(pypi) if pypi else Path(repo or ".").resolve()
    language = pick_language(root, config.language)
    files = source_files(root, LANGUAGES[language])
    if not files:
        raise InputError(f"no {language} files under {root}; pass --language for another language")
    out = out or Path("fimble-eval")
    out.mkdir(parents=True, exist_ok=True)
    source = pypi or str(root)
    with tqdm(desc="indexing", unit="file", leave=False) as bar:
        index = _open_index(root, lambda done, total: _track(bar, done, total), writable=mode != "served")
    cases: list[Case] = []
    revisits: list[Case] = []
    try:
        samples = choose(index, files, config)
        if mode != "ceiling":
            texts = dict(files)
            languages = {path: detect_language(path) for path in texts}
            cases = build_cases(samples, texts, languages, classifier(index, files, config), config.seed)
            revisits = revisit_plan(cases)
            _write_cases(out / "cases.jsonl", cases, revisits, source)
        prepared = []
        if mode != "served":
            with tqdm(total=len(samples), desc="masking lines", unit="line", leave=False) as bar:
                prepared = prepare(index, files, config, bar.update, samples=samples)
    finally:
        index.close()
    rows: list[dict[str, Any]] = []
    served_rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    settings = served or ServedSettings()
    interrupted = False
    try:
        if mode != "served":
            _run_ceiling(config, prepared, out, rows)
        if mode != "ceiling":
            _run_served(config, settings, root, cases, revisits, out, served_rows, runs, server_budgets)
    except KeyboardInterrupt:  # Ctrl-C: report what was measured so far
        interrupted = True
    meta = {
        "source": source,
        "root": str(root),
        "language": language,
        "files": len(files),
        "samples": len(samples),
        "seed": config.seed,
        "mode": mode,
        "models": list(config.models),
        "contexts": list(config.contexts),
        "prefix_budget": config.prefix_budget,
        "suffix_budget": config.suffix_budget,
        "context_budget": config.context_budget,
        "max_tokens": config.max_tokens,
        "width": config.width,
        "cross_share": config.cross_share,
        "cross_unseen": config.cross_unseen,
        "machine": machine_info(config.threads),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        # Others' work on the machine slows the server down and so makes it miss deadlines: the
        # served numbers (not only latencies) depend on it.
        "load_average": {"start": load_at_start, "end": _load_average()},
        "interrupted": interrupted,
    }
    from fimble.evaluation.report import build_report, write_report

    report = build_report(rows, meta) if mode != "served" else {"meta": meta}
    if mode != "ceiling":
        report["served"] = served_section(
            served_rows, rows, runs, settings, cases, revisits, config, server_budgets
        )
    return report, write_report(report, out)


def served_section(
    served_rows: list[dict[str, Any]],
    ceiling_rows: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    settings: ServedSettings,
    cases: list[Case],
    revisits: list[Case],
    config: EvalConfig,
    server_budgets: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``eval.json``'s ``served`` key: how the server ran, the summary table (with the ceiling's
    rows in the same form when both ran), the paired comparison with the ceiling, every answer."""
    from fimble.evaluation.served import initialization_options
    from fimble.evaluation.served_report import ceiling_summary, served_summary, versus_ceiling

    return {
        "settings": {
            "think_ms": list(settings.think_ms),
            "initialization_options": initialization_options(
                config.max_tokens, settings.server_options, server_budgets
            ),
            "settle_ms": settings.settle_ms,
            "threads": config.threads,
        },
        "cases": len(cases),
        "revisits": len(revisits),
        "cases_file": "cases.jsonl",
        "runs": runs,
        "summary": served_summary(served_rows) + ceiling_summary(ceiling_rows),
        "versus_ceiling": versus_ceiling(served_rows, ceiling_rows),
        "rows": served_rows,
    }


def _open_index(root: Path, progress: Any, *, writable: bool) -> Any:
    """The source's index, built; when only read (served: choosing lines) and another fimble
    writes it (an editor's server on this repository), read theirs."""
    from fimble.errors import IndexLocked
    from fimble.evaluation.runner import open_index
    from fimble.indexer import WorkspaceIndex

    try:
        return open_index(root, progress)
    except IndexLocked:
        if writable:
            raise
        return WorkspaceIndex.open(root, writable=False)


def _write_cases(path: Path, cases: list[Case], revisits: list[Case], source: str) -> None:
    again = {c.id for c in revisits}
    with open(path, "w", encoding="utf-8") as f:
        for order, case in enumerate(cases):
            f.write(json.dumps(case_record(case, source, order, case.id in again), ensure_ascii=False) + "\n")


def _run_ceiling(config: EvalConfig, prepared: list[Any], out: Path, rows: list[dict[str, Any]]) -> None:
    """Every prepared sample per model and context setting, in-process from its full prompt."""
    from tqdm import tqdm

    from fimble.completion.engine.loading import load_engine
    from fimble.evaluation.runner import run_model

    total = len(prepared) * len(config.contexts) * len(config.models)
    # Rows are also appended to samples.jsonl as they come: a long run stopped early keeps its work.
    with (
        tqdm(total=total, desc="completing", unit="line") as bar,
        open(out / "samples.jsonl", "w", encoding="utf-8") as log,
    ):

        def keep(row: dict[str, Any]) -> None:
            rows.append(row)
            log.write(json.dumps(row, ensure_ascii=False) + "\n")
            log.flush()

        for model in config.models:
            bar.set_postfix_str(model)
            # No warmer: every sample is answered from its full prompt (context included), as the
            # server does once a region is warm; the cold region's first prompt is what ``served`` sees.
            engine = load_engine(model, threads=config.threads, **_engine_size(config))
            try:
                run_model(engine, model, prepared, config, bar.update, on_row=keep)
            finally:
                engine.close()


def _engine_size(config: EvalConfig) -> dict[str, int]:
    """KV cells and batch slots for the ceiling: one at a time the default context; side by side
    (``config.width``) room for every slot's longest prompt and answer at once (the cells are
    shared by all sequences, a head they share counted once)."""
    if config.width <= 1:
        return {}
    per_seq = config.prefix_budget + config.suffix_budget + config.context_budget + config.max_tokens + 64
    return {"n_ctx": min(65536, max(4096, per_seq * config.width)), "batch_slots": config.width}


def _run_served(
    config: EvalConfig,
    settings: ServedSettings,
    root: Path,
    cases: list[Case],
    revisits: list[Case],
    out: Path,
    rows: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    server_budgets: dict[str, int] | None,
) -> None:
    from tqdm import tqdm

    from fimble.evaluation.served import run_served

    total = (len(cases) + len(revisits)) * len(config.models) * len(settings.think_ms)
    with (
        tqdm(total=total, desc="asking the server", unit="place") as bar,
        open(out / "served.jsonl", "w", encoding="utf-8") as log,
    ):

        def keep(row: dict[str, Any]) -> None:
            rows.append(row)
            log.write(json.dumps(row, ensure_ascii=False) + "\n")
            log.flush()

        run_served(
            root,
            cases,
            revisits,
            models=config.models,
            settings=settings,
            max_tokens=config.max_tokens,
            threads=config.threads,
            out=out,
            extra_options=server_budgets,
            on_row=keep,
            progress=bar.update,
            on_run=runs.append,
        )


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # (not on every platform)
        return None


def _track(bar: Any, done: int, total: int) -> None:
    bar.total = total
    bar.n = done
    bar.refresh()
