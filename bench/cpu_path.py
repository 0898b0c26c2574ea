"""What each CPU path costs: prompt and generation speed with weight repacking (AMX left out) vs none.

When the probe (``fimble.models.cpu_path``) finds that a machine's AMX faults, fimble keeps repacking
and leaves AMX out; when repacking faults too, it falls back to plain CPU buffers. This benchmark
measures the price of each step on the machine at hand: one fresh process per path and round (a
path's buffer types are chosen at load), paths interleaved round by round so drift (a busy neighbour,
thermal) hits all of them alike, medians reported with the plain/repacked ratio. The memory bandwidth
is measured beside it, since generation speed is bound by it (one read of the weights per token).

Writes ``bench/results/cpu_path.json``. Run: ``.venv/bin/python bench/cpu_path.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import psutil

PROMPT_TOKENS = 512
GENERATE = 64


def _source_tokens(engine: Any) -> list[int]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    return engine.tokenize((lib / "argparse.py").read_text())


def child(model: str, path: str, threads: int) -> dict[str, Any]:
    """One load on ``path``: load time, prompt tok/s over PROMPT_TOKENS, greedy generation tok/s."""
    from fimble.completion.engine import Engine, EngineConfig

    rss0 = psutil.Process().memory_info().rss
    t = time.perf_counter()
    os.environ["FIMBLE_CPU_PATH"] = path
    engine = Engine(model, EngineConfig(threads=threads, n_ctx=2048, speculative=False))
    load_ms = (time.perf_counter() - t) * 1000
    tokens = _source_tokens(engine)
    engine.prepare(tokens[:16])  # first-decode set-up (graph, buffers) is not prompt speed
    engine.reset()
    t = time.perf_counter()
    engine.prepare(tokens[:PROMPT_TOKENS])
    prompt_s = time.perf_counter() - t
    engine.reset()
    gen = engine.generate(tokens[:200], max_tokens=GENERATE)
    out = {
        "load_ms": round(load_ms, 1),
        "prompt_tok_s": round(PROMPT_TOKENS / prompt_s, 1),
        "generation_tok_s": round(gen.tokens_per_s, 2),
        "generated": len(gen.tokens),
        "rss_mb": round((psutil.Process().memory_info().rss - rss0) / 2**20, 1),
    }
    engine.close()
    return out


def bandwidth_gb_s(size_mb: int = 512, repeats: int = 5) -> float:
    """Sustained read bandwidth (numpy sum over a buffer far larger than the caches), best of N."""
    import numpy as np

    buf = np.ones(size_mb * 2**20 // 8, dtype=np.float64)
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        buf.sum()
        best = max(best, buf.nbytes / (time.perf_counter() - t) / 1e9)
    return round(best, 1)


def _paths(model: str) -> list[str]:
    """The paths this build can take: no-amx only where the build has an AMX buffer type."""
    from fimble.models import cpu_path

    offered = cpu_path.verdict_for(model).extra_bufts
    return ["full", *(["no-amx"] if "AMX" in offered else []), "plain"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="model name or .gguf path")
    parser.add_argument("--threads", type=int, default=0, help="0: physical cores")
    parser.add_argument("--rounds", type=int, default=3, help="fresh loads per path (interleaved)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/cpu_path.json"))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    from fimble.completion.engine import default_threads
    from fimble.models import store

    model = str(store.resolve(args.model))
    threads = args.threads or default_threads()
    if args.child:
        print(json.dumps(child(model, args.child, threads)))
        return
    paths = _paths(model)
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
    for r in range(args.rounds):
        for p in paths:
            print(f"round {r + 1}/{args.rounds}: {p} ...", file=sys.stderr)
            done = subprocess.run(
                [sys.executable, __file__, "--model", model, "--threads", str(threads), "--child", p],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                runs[p].append({"error": done.returncode, "stderr": done.stderr[-500:]})
                continue
            runs[p].append(json.loads(done.stdout.strip().splitlines()[-1]))

    def median(p: str, key: str) -> float | None:
        values = [r[key] for r in runs[p] if key in r]
        return round(statistics.median(values), 2) if values else None

    summary = {
        p: {k: median(p, k) for k in ("load_ms", "prompt_tok_s", "generation_tok_s", "rss_mb")} for p in paths
    }
    repacked = "no-amx" if "no-amx" in paths else "full"
    ratio = {
        k: round(summary["plain"][k] / summary[repacked][k], 3)
        for k in ("prompt_tok_s", "generation_tok_s")
        if summary["plain"][k] and summary[repacked][k]
    }
    model_bytes = Path(model).stat().st_size
    bandwidth = bandwidth_gb_s()
    result = {
        "bench": "cpu_path",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores_physical": psutil.cpu_count(logical=False),
            "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "bandwidth_gb_s": bandwidth,
            "generation_floor_tok_s": round(bandwidth * 1e9 / model_bytes, 1),
            "loadavg": os.getloadavg(),
        },
        "model": Path(model).name,
        "model_bytes": model_bytes,
        "threads": threads,
        "prompt_tokens": PROMPT_TOKENS,
        "generated_tokens": GENERATE,
        "rounds": args.rounds,
        "paths": summary,
        "plain_vs_repacked": ratio,
        "repacked_path": repacked,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("machine", "paths", "plain_vs_repacked")}, indent=2))


if __name__ == "__main__":
    main()
