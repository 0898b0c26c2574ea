"""Repository context's effect over several `fimble eval` runs together, and how sure it is.

One project's 40 lines say little on their own: a line that flips moves exact match by 2.5 points.
This reads committed eval JSONs, rebuilds each one's ``context_effect`` from its rows (so older files
get the won/lost lines, sign test and bootstrap interval too; predictions and timings untouched),
and pools the lines of all of them per group into one paired effect. Results go into the JSON file
under ``--label``, keeping the other labels there, so one file holds several pools:

    python bench/context_effect.py bench/results/eval_*_unseen*.json --label all_unseen
    python bench/context_effect.py bench/results/eval_*_unseen_s11.json --label new_lines
    python bench/context_effect.py bench/results/eval_{flask,flask_cross,openai_agents_cross_n80}.json \
        --label wider
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from fimble.evaluation.paired import paired_effect
from fimble.evaluation.report import EFFECT_GROUPS, context_effect, paired_outcomes


def _dumps_like(report: dict[str, Any], original: str) -> str:
    """``report`` as JSON in the layout ``original`` has (indent, escaped non-ASCII), so a rewrite's
    diff is the rebuilt ``context_effect`` and nothing else."""
    second = original.split("\n", 2)[1]
    indent = len(second) - len(second.lstrip(" "))
    ascii_only = "\\u00" in original
    end = "\n" if original.endswith("\n") else ""
    return json.dumps(report, indent=indent or 2, ensure_ascii=ascii_only) + end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="fimble eval JSON files")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--out", type=Path, default=Path("bench/results/context_effect.json"))
    parser.add_argument("--label", default="pooled", help="where in --out this pool goes (others are kept)")
    parser.add_argument(
        "--rewrite", action="store_true", help="also write each file's rebuilt context_effect back"
    )
    args = parser.parse_args()

    runs: dict[str, Any] = {}
    pooled: dict[str, list[tuple[bool, bool]]] = {g: [] for g in EFFECT_GROUPS}
    for path in args.results:
        report = json.loads(path.read_text())
        report["context_effect"] = context_effect(report["samples"])
        if args.rewrite:
            path.write_text(_dumps_like(report, path.read_text()))
        runs[path.name] = {
            "source": report["meta"]["source"],
            "effect": report["context_effect"].get(args.model, {}),
        }
        for group in EFFECT_GROUPS:
            pooled[group] += paired_outcomes(report["samples"], args.model, group)
    out = {
        "meta": {
            "model": args.model,
            "files": [p.name for p in args.results],
            "written": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        },
        "runs": runs,
        "pooled": {g: paired_effect(p).as_dict() for g, p in pooled.items() if p},
    }
    kept = json.loads(args.out.read_text()) if args.out.exists() else {}
    kept[args.label] = out
    args.out.write_text(json.dumps(kept, indent=1) + "\n")
    lines = [(name, group, g) for name, run in runs.items() for group, g in run["effect"].items()]
    lines += [("pooled", group, g) for group, g in out["pooled"].items()]
    for name, group, g in lines:
        if g["n"]:
            print(
                f"{name:<36} {group:<18} n={g['n']:<4} {g['without']} -> {g['with']} ({g['relative_change']})"
                f"  won {g['won']} lost {g['lost']}  p={g['p_value']}  95% {g['interval']}"
            )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
