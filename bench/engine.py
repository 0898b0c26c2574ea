"""Engine benchmark: prompt and generation speed, cached-prompt latency, load time, RSS, overhead.

Writes JSON (default ``bench/results/engine.json``). Compares fimble's engine with plain
llama-cpp-python (``Llama.eval``/``Llama.generate``) on the same model, prompt and threads, so the
engine's overhead is measured rather than assumed. Run: ``make bench`` or
``.venv/bin/python bench/engine.py --model qwen2.5-coder-1.5b``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import psutil

from fimble.completion.engine import Engine, EngineConfig, default_threads
from fimble.models import store


def _source_text() -> str:
    """Real code to tokenize: the standard library's json decoder and argparse (plenty of tokens)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    return (lib / "json" / "decoder.py").read_text() + (lib / "argparse.py").read_text()


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def bench_fimble(path: Path, threads: int, tokens: list[int], repeats: int) -> dict[str, Any]:
    rss0 = psutil.Process().memory_info().rss
    t = time.perf_counter()
    engine = Engine(path, EngineConfig(threads=threads, n_ctx=4096))
    load_s = time.perf_counter() - t
    out: dict[str, Any] = {"load_ms": round(load_s * 1000, 1)}
    for n in (500, 1500):
        times = []
        for _ in range(repeats):
            engine.reset()
            t = time.perf_counter()
            engine.prepare(tokens[:n])
            times.append(time.perf_counter() - t)
        out[f"prompt_{n}_ms"] = _median_ms(times)
        out[f"prompt_{n}_tok_s"] = round(n / statistics.median(times), 1)
    # Extra tokens on a cached 1500-token prompt: what a keystroke costs when only the tail changed.
    base = tokens[:1500]
    for extra in range(1, 6):
        times = []
        for _ in range(repeats):
            engine.prepare(base)
            t = time.perf_counter()
            reused, evaluated = engine.prepare(tokens[: 1500 + extra])
            times.append(time.perf_counter() - t)
        assert evaluated == extra, (reused, evaluated)
        out[f"cached_plus_{extra}_ms"] = _median_ms(times)
    engine.reset()
    gen_times = []
    for _ in range(repeats):
        engine.reset()
        gen = engine.generate(tokens[:200], max_tokens=64)
        gen_times.append(gen.generation_ms / 1000 / max(1, len(gen.tokens)))
    out["generation_tok_s"] = round(1 / statistics.median(gen_times), 1)
    out["rss_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    out["rss_delta_mb"] = round((psutil.Process().memory_info().rss - rss0) / 2**20, 1)
    engine.close()
    return out


def bench_raw(path: Path, threads: int, tokens: list[int], repeats: int) -> dict[str, Any]:
    """The same measurements through plain llama-cpp-python, for the overhead ratio."""
    from llama_cpp import Llama

    from fimble.models import cpu_path

    cpu_path.apply_to_process(cpu_path.verdict_for(path).path or cpu_path.CpuPath.PLAIN)
    llm = Llama(str(path), n_ctx=4096, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
    out: dict[str, Any] = {}
    times = []
    for _ in range(repeats):
        llm.reset()
        t = time.perf_counter()
        llm.eval(tokens[:1500])
        times.append(time.perf_counter() - t)
    out["prompt_1500_ms"] = _median_ms(times)
    gen_times = []
    for _ in range(repeats):
        llm.reset()
        llm.eval(tokens[:200])
        t = time.perf_counter()
        n = 0
        for _tok in llm.generate(tokens[:200], top_k=1, temp=0.0, reset=False):
            n += 1
            if n == 64:
                break
        gen_times.append((time.perf_counter() - t) / n)
    out["generation_tok_s"] = round(1 / statistics.median(gen_times), 1)
    llm.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="model name or .gguf path")
    parser.add_argument("--threads", type=int, default=0, help="0: physical cores")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-raw", action="store_true", help="skip the plain llama-cpp-python comparison")
    parser.add_argument("--out", type=Path, default=Path("bench/results/engine.json"))
    args = parser.parse_args()

    path = store.resolve(args.model)
    threads = args.threads or default_threads()
    probe = Engine(path, EngineConfig(threads=threads, n_ctx=512))
    tokens = probe.tokenize(_source_text())[:2000]
    probe.close()
    print(f"benchmarking {path.name} with {threads} threads ...", file=sys.stderr)
    result: dict[str, Any] = {
        "bench": "engine",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores_physical": psutil.cpu_count(logical=False),
            "cores_logical": psutil.cpu_count(),
            "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "loadavg_before": os.getloadavg(),
        },
        "model": path.name,
        "model_bytes": path.stat().st_size,
        "threads": threads,
        "fimble": bench_fimble(path, threads, tokens, args.repeats),
    }
    if not args.no_raw:
        raw = bench_raw(path, threads, tokens, args.repeats)
        result["llama_cpp_python"] = raw
        f = result["fimble"]
        result["overhead"] = {
            "prompt_1500": round(f["prompt_1500_ms"] / raw["prompt_1500_ms"] - 1, 4),
            "generation": round(raw["generation_tok_s"] / f["generation_tok_s"] - 1, 4),
        }
    result["machine"]["loadavg_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
