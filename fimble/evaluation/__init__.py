"""`fimble eval`: measure completion quality and cost on real code, with and without repository context.

Only ``fimble.commands.eval`` imports this package; it sits beside the server as another user of
``fimble.completion`` and ``fimble.indexer``.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from fimble.evaluation.runner import EvalConfig

__all__ = ["EvalConfig", "evaluate", "machine_info"]


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


def evaluate(
    config: EvalConfig, *, repo: Path | None = None, pypi: str | None = None, out: Path | None = None
) -> tuple[dict[str, Any], tuple[Path, Path]]:
    """Index the source, mask ``config.samples`` lines, complete them per model and context setting,
    and write ``eval.json`` and ``eval.html`` into ``out``. Returns the report and the two paths."""
    from tqdm import tqdm

    from fimble.completion.loading import load_engine
    from fimble.evaluation.report import build_report, write_report
    from fimble.evaluation.runner import open_index, prepare, run_model
    from fimble.evaluation.sources import fetch_sdist, source_files

    started = time.time()
    root = fetch_sdist(pypi) if pypi else Path(repo or ".").resolve()
    files = source_files(root)
    with tqdm(desc="indexing", unit="file", leave=False) as bar:
        index = open_index(root, lambda done, total: _track(bar, done, total))
    try:
        with tqdm(total=config.samples, desc="masking lines", unit="line", leave=False) as bar:
            prepared = prepare(index, files, config, bar.update)
    finally:
        index.close()
    rows: list[dict[str, Any]] = []
    total = len(prepared) * len(config.contexts) * len(config.models)
    out = out or Path("fimble-eval")
    out.mkdir(parents=True, exist_ok=True)
    interrupted = False
    # Rows are also appended to samples.jsonl as they come: a long run stopped early keeps its work.
    with tqdm(total=total, desc="completing", unit="line") as bar, open(
        out / "samples.jsonl", "w", encoding="utf-8"
    ) as log:

        def keep(row: dict[str, Any]) -> None:
            rows.append(row)
            log.write(json.dumps(row, ensure_ascii=False) + "\n")
            log.flush()

        try:
            for model in config.models:
                bar.set_postfix_str(model)
                # No warmer: every sample is answered from its full prompt (context included), as the
                # server does once a region is warm; the small cold-region prompt is bench/restart.py's.
                engine = load_engine(model, threads=config.threads, warmup=False)
                try:
                    run_model(engine, model, prepared, config, bar.update, on_row=keep)
                finally:
                    engine.close()
        except KeyboardInterrupt:  # Ctrl-C: report what was measured so far
            interrupted = True
    meta = {
        "source": pypi or str(root),
        "root": str(root),
        "files": len(files),
        "samples": len(prepared),
        "seed": config.seed,
        "models": list(config.models),
        "contexts": list(config.contexts),
        "prefix_budget": config.prefix_budget,
        "suffix_budget": config.suffix_budget,
        "max_tokens": config.max_tokens,
        "cross_share": config.cross_share,
        "cross_unseen": config.cross_unseen,
        "machine": machine_info(config.threads),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "interrupted": interrupted,
    }
    report = build_report(rows, meta)
    return report, write_report(report, out)


def _track(bar: Any, done: int, total: int) -> None:
    bar.total = total
    bar.n = done
    bar.refresh()
