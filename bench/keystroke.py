"""What one keystroke costs: type real lines one character at a time, complete after each.

Through the ``Completer`` (the engine, its KV cache and typing through the shown suggestion; no LSP):
for each keystroke, the tokens evaluated, the prompt time and the whole request. Lines come from the
standard library of the running interpreter (real code, not written for the benchmark). Writes JSON (default
``bench/results/keystroke.json``). The LSP-level typing replay is a separate benchmark.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sysconfig
import time
from pathlib import Path
from typing import Any

from fimble.completion.completer import Completer
from fimble.completion.engine import Engine, EngineConfig, default_threads
from fimble.completion.service import CompletionRequest
from fimble.models import store

FILES = ("json/encoder.py", "textwrap.py", "csv.py", "shlex.py")


def _lines(rng: random.Random, per_file: int, files: list[Path]) -> list[tuple[str, int]]:
    picked = []
    for path in files:
        text = path.read_text()
        lines = text.split("\n")
        candidates = [i for i, ln in enumerate(lines) if 20 <= len(ln.strip()) <= 60 and i > 30]
        picked += [(text, i) for i in rng.sample(candidates, per_file)]
    return picked


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--lines-per-file", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument(
        "--files",
        type=Path,
        nargs="*",
        help="source files to type lines from (default: four standard-library modules, which the model "
        "has probably seen in training; pass code it cannot have seen for an honest typed-through rate)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/keystroke.json"))
    args = parser.parse_args()

    engine = Engine(store.resolve(args.model), EngineConfig(threads=default_threads()))
    completer = Completer(load=lambda: engine)
    keystrokes: list[dict[str, Any]] = []
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = args.files or [lib / name for name in FILES]
    for text, index in _lines(random.Random(7), args.lines_per_file, files):
        lines = text.split("\n")
        line = lines[index]
        start = sum(len(x) + 1 for x in lines[:index])
        indent = len(line) - len(line.lstrip())
        # A new region of a file: the first request pays for the whole prompt.
        completer.worker.submit(lambda e, _c: e.reset()).future.result()
        for col in range(indent, len(line) + 1):
            doc = text[: start + col] + text[start + len(line) :]
            t = time.perf_counter()
            req = CompletionRequest(text=doc, offset=start + col, max_tokens=args.max_tokens)
            result = completer.submit(req, key=f"line{index}").future.result()
            total = (time.perf_counter() - t) * 1000
            gen = result.generation
            keystrokes.append(
                {
                    "first": col == indent,
                    "typed_through": result.stop_reason == "typed_through",
                    "evaluated": gen.tokens_evaluated,
                    "prompt_ms": gen.prompt_ms,
                    "total_ms": total,
                }
            )
    typed = [k for k in keystrokes if not k["first"]]
    result = {
        "bench": "keystroke",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "model": args.model,
        "files": [str(f) for f in files],
        "keystrokes": len(typed),
        "typed_through_rate": round(sum(k["typed_through"] for k in typed) / len(typed), 3),
        "tokens_evaluated_p50": statistics.median(k["evaluated"] for k in typed),
        "tokens_evaluated_p90": _pct([k["evaluated"] for k in typed], 0.9),
        "prompt_ms_p50": _pct([k["prompt_ms"] for k in typed], 0.5),
        "prompt_ms_p90": _pct([k["prompt_ms"] for k in typed], 0.9),
        "request_ms_p50": _pct([k["total_ms"] for k in typed], 0.5),
        "request_ms_p90": _pct([k["total_ms"] for k in typed], 0.9),
        "first_request_ms_p50": _pct([k["total_ms"] for k in keystrokes if k["first"]], 0.5),
    }
    completer.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
