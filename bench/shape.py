"""Cost of deciding a suggestion's shape at the cursor, and of the stop rules per generated token.

The shape decision runs on every request before the prompt is built, and the stop rules after every
generated token, so both must stay far below a token's ~35 ms. Measured on real code: the largest
modules of the Python standard library (not its tests or data tables), a cursor at the end of every
Nth line, mid-line and on blank lines. Also the whole-file parse the window avoids.
Writes JSON (default ``bench/results/shape.json``). Run it under the team CPU lock:
``flock /tmp/team/cpu.lock .venv/bin/python bench/shape.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import statistics
import sysconfig
import time
from pathlib import Path
from typing import Any

from fimble.completion.output.shape import analyze, stop_context
from fimble.completion.output.stops import make_stop_check
from fimble.indexer.parse import parser


def _files(count: int) -> list[Path]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "pydoc_data", "encodings", "site-packages"}
    found = [p for p in lib.rglob("*.py") if not skip & set(p.parts) and p.stat().st_size < 1_000_000]
    return sorted(found, key=lambda p: p.stat().st_size, reverse=True)[:count]


def _cursors(text: str, every: int) -> list[int]:
    """Offsets: the end of every ``every``-th line, the middle of the next one, and blank lines."""
    out = []
    offset = 0
    for i, line in enumerate(text.split("\n")):
        if i % every == 0:
            out.append(offset + len(line))
        elif i % every == 1 and len(line) > 8:
            out.append(offset + len(line) // 2)
        elif not line.strip() and i % 7 == 0:
            out.append(offset + len(line))
        offset += len(line) + 1
    return out


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--every", type=int, default=9, help="take every Nth line as a cursor")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "shape.json")
    args = ap.parse_args()

    files = _files(args.files)
    analyze("x = 1\n", "", "python")  # load the grammar once, outside the timings
    times: list[float] = []
    cpu: list[float] = []  # this process's CPU time: wall time also counts waiting for a shared core
    reasons: collections.Counter[str] = collections.Counter()
    full_parse: list[float] = []
    stop_per_token: list[float] = []
    sample = (
        "\n    total = 0\n    for item in items:\n        total += item.price * item.count\n"
        "    return total\n"
    )
    for path in files:
        text = path.read_text("utf-8", "replace")
        t = time.perf_counter()
        parser("python").parse(text.encode())
        full_parse.append((time.perf_counter() - t) * 1000)
        for offset in _cursors(text, args.every):
            prefix, suffix = text[:offset], text[offset:]
            t, c = time.perf_counter(), time.process_time()
            syntax = analyze(prefix, suffix, "python")
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            reasons[syntax.reason] += 1
            if len(stop_per_token) < 2000:
                check = make_stop_check(stop_context(prefix, suffix, syntax))
                t = time.perf_counter()
                for end in range(4, len(sample), 4):  # ~4 characters per token
                    check(sample[:end])
                stop_per_token.append((time.perf_counter() - t) * 1000 / (len(sample) // 4))
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "files": len(files),
        "file_lines_median": int(statistics.median(p.read_text().count("\n") for p in files)),
        "cursors": len(times),
        "analyze_ms": {
            "p50": _pct(times, 0.5),
            "p90": _pct(times, 0.9),
            "p99": _pct(times, 0.99),
            "max": round(max(times), 3),
        },
        "analyze_cpu_ms": {"p50": _pct(cpu, 0.5), "p90": _pct(cpu, 0.9), "p99": _pct(cpu, 0.99)},
        "whole_file_parse_ms": {"p50": _pct(full_parse, 0.5), "max": round(max(full_parse), 3)},
        "stop_check_ms_per_token": {"p50": _pct(stop_per_token, 0.5), "p99": _pct(stop_per_token, 0.99)},
        "multiline_share": round(
            sum(n for r, n in reasons.items() if r in _MULTI) / max(1, sum(reasons.values())), 3
        ),
        "reasons": dict(reasons.most_common()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


_MULTI = {"block header", "open bracket", "empty body", "end of a block", "end of file", "empty block"}

if __name__ == "__main__":
    main()
