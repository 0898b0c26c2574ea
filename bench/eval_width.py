"""What ``fimble eval --mode ceiling --width N`` saves, and whether its answers are the same.

Each input is the folder of one ceiling run of the same lines at one width (``--width 1`` is the
baseline: one line after another). For every width this writes the run's wall time against the
baseline's, the tokens read and generated, and every prediction that differs from the baseline's,
with the near-ties the batch decoder counted in that row (the only place where the batch is allowed
to differ: another batch shape rounds a close choice otherwise)::

    for w in 1 4 8; do
      chrt -r 1 fimble eval --mode ceiling --pypi requests==2.32.3 -n 20 --seed 0 --width $w --out runs/w$w
    done
    python bench/eval_width.py runs/w1 runs/w4 runs/w8 --out bench/results/eval_width_requests.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def load(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "eval.json").read_text(encoding="utf-8"))


def _key(row: dict[str, Any]) -> tuple[str, bool]:
    return row["id"], bool(row["context"])


def summary(run: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """One width's figures against the baseline run's."""
    rows, before = run["samples"], {_key(r): r for r in base["samples"]}
    differ = [
        {
            "id": r["id"],
            "context": r["context"],
            "width_1": before[_key(r)]["prediction"],
            "this_width": r["prediction"],
            "truth": r["truth"],
            "near_ties": r.get("near_ties", 0),
        }
        for r in rows
        if r["prediction"] != before[_key(r)]["prediction"]
    ]
    exact = {
        name: {"exact_match": s["groups"]["all"]["exact_match"], "n": s["groups"]["all"]["n"]}
        for name, s in run["summaries"].items()
    }
    return {
        "width": run["meta"].get("width", 1),
        "seconds": run["meta"]["seconds"],
        "speedup": round(base["meta"]["seconds"] / run["meta"]["seconds"], 3),
        "requests": len(rows),
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "tokens_evaluated": sum(r["tokens_evaluated"] for r in rows),
        "tokens_generated": sum(r["tokens_generated"] for r in rows),
        # Alone, the time each line spent reading its prompt and generating (in a batch a row's own
        # times include the other rows' steps, so they are not summed there).
        "prompt_s": round(sum(r["prompt_ms"] for r in rows) / 1000, 1) if run is base else None,
        "generation_s": round(sum(r["generation_ms"] for r in rows) / 1000, 1) if run is base else None,
        "rows_with_near_ties": sum(1 for r in rows if r.get("near_ties")),
        "exact_match": exact,
        "differ": differ,
        "differ_without_near_tie": sum(1 for d in differ if not d["near_ties"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="ceiling runs of the same lines, --width 1 first")
    parser.add_argument("--out", type=Path, help="write the JSON here (default: stdout)")
    args = parser.parse_args(argv)
    runs = [load(f) for f in args.runs]
    base = runs[0]
    if base["meta"].get("width", 1) != 1:
        parser.error("the first run must be the baseline, --width 1")
    out = {"source": base["meta"].get("source"), "widths": [summary(r, base) for r in runs]}
    text = json.dumps(out, indent=2, ensure_ascii=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
