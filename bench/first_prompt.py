"""How big a cold place's first prompt must be: exact match against prompt size, from ceiling runs.

A cold place (a newly opened file, a far jump) is answered from a first prompt before the full one
is read (``fimble/completion/warmup.py``). Its size is a trade: every token costs ~8 ms of prompt
evaluation on 2 cores, and too few tokens answer wrong. Each input is the folder of one
``fimble eval --mode ceiling --context on`` run with given budgets (no deadline, the same lines for
every budget of a project); this pools them per budget set, pairs each with the full prompt's run on
the same lines (lines won and lost), and writes one JSON file::

    for b in "256 64 64" "384 64 128" "768 128 256"; do set -- $b
      fimble eval --pypi requests==2.32.3 -n 60 --seed 0 --mode ceiling --context on \\
        --prefix-tokens $1 --suffix-tokens $2 --context-tokens $3 --out runs/requests_$1_$2_$3
    done   # and flask==3.0.3 (-n 60), rxjs 7.8.1's src/ (--language typescript -n 40)
    python bench/first_prompt.py runs/* --out bench/results/first_prompt.json

``--against P,S,C`` pairs each run with another budget set's run instead of the full prompt's (a
layout against the one it would replace: ``bench/results/first_prompt_layout.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from fimble.evaluation.metrics import percentile
from fimble.evaluation.served_report import wilson

_ROOT = Path(__file__).resolve().parents[1]
FULL = (768, 128, 256)  # the full prompt's default budgets (fimble/completion/prompt/fim.py)


def load(folder: Path) -> tuple[tuple[int, int, int], str, dict[str, dict[str, Any]]]:
    """(budgets, source, rows by sample id) of one ceiling run with context on."""
    data = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
    meta = data["meta"]
    budgets = (meta["prefix_budget"], meta["suffix_budget"], meta["context_budget"])
    rows = {r["id"]: r for r in data["samples"] if r.get("context")}
    source = str(meta["source"])
    if "/" in source:  # a folder (a project from npm, say): its last parts name it, not this machine's path
        source = "/".join(Path(source).parts[-2:])
    return budgets, source, rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    hits = sum(1 for r in rows if r["exact"])
    low, high = wilson(hits, n)
    by = {
        group: [r for r in rows if pick(r)]
        for group, pick in (
            ("cross_file", lambda r: r["cross_file"]),
            ("other", lambda r: not r["cross_file"]),
            ("line_start", lambda r: r["kind"] == "line_start"),
            ("mid_line", lambda r: r["kind"] != "line_start"),
        )
    }
    return {
        "n": n,
        "exact_match": round(hits / n, 4) if n else None,
        "exact_match_ci95": [round(low, 4), round(high, 4)],
        **{
            f"exact_match_{g}": round(sum(r["exact"] for r in rs) / len(rs), 4) if rs else None
            for g, rs in by.items()
        },
        "prompt_tokens_mean": round(sum(r["prompt_tokens"] for r in rows) / n, 1) if n else None,
        "latency_p50_ms": percentile([r["latency_ms"] for r in rows], 50),
    }


def _paired(table: list[dict[str, Any]], budgets: tuple[int, int, int], label: str) -> dict[str, Any]:
    """The runs' won / lost against the paired budget set, summed over sources."""
    pairs = [e[label] for e in table if tuple(e["budgets"]) == budgets and label in e]
    if not pairs:
        return {}
    return {label: {k: sum(p[k] for p in pairs) for k in ("lines", "won", "lost")}}


def pool(folders: list[Path], against: tuple[int, int, int] = FULL) -> dict[str, Any]:
    runs = [load(f) for f in folders]
    base = {source: rows for budgets, source, rows in runs if budgets == against}
    label = "against_full" if against == FULL else "against_" + "_".join(map(str, against))
    per_budget: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
    table: list[dict[str, Any]] = []
    for budgets, source, rows in runs:
        per_budget[budgets].extend(rows.values())
        entry = {"source": source, "budgets": list(budgets), **_summary(list(rows.values()))}
        if source in base and budgets != against:
            both = sorted(set(rows) & set(base[source]))
            entry[label] = {
                "lines": len(both),
                "won": sum(1 for i in both if rows[i]["exact"] and not base[source][i]["exact"]),
                "lost": sum(1 for i in both if base[source][i]["exact"] and not rows[i]["exact"]),
            }
        table.append(entry)
    pooled = [
        {
            "budgets": list(b),
            "sources": sorted({e["source"] for e in table if tuple(e["budgets"]) == b}),
            **_summary(rows),
            **_paired(table, b, label),
        }
        for b, rows in sorted(per_budget.items(), key=lambda kv: sum(kv[0]))
    ]
    return {"runs": sorted(table, key=lambda e: (e["source"], sum(e["budgets"]))), "pooled": pooled}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders of `fimble eval --mode ceiling` runs")
    parser.add_argument("--out", type=Path, default=_ROOT / "bench" / "results" / "first_prompt.json")
    parser.add_argument(
        "--against",
        default=",".join(map(str, FULL)),
        help="prefix,suffix,context budgets each run is paired with (won / lost); default the full prompt's",
    )
    args = parser.parse_args(argv)
    try:
        prefix, suffix, context = (int(x) for x in args.against.split(","))
    except ValueError:
        parser.error("--against takes three budgets: prefix,suffix,context")
    against = (prefix, suffix, context)
    first = json.loads((args.runs[0] / "eval.json").read_text(encoding="utf-8"))["meta"]
    result = {
        "bench": "first prompt: exact match against prompt size (ceiling runs, context on, no deadline)",
        "model": "qwen2.5-coder-1.5b",
        "machine": first.get("machine"),
        "started": first.get("started"),
        **pool(args.runs, against),
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for row in result["pooled"]:
        print(
            f"{'/'.join(map(str, row['budgets'])):>12}  n={row['n']:>3}  EM {row['exact_match']:.0%} "
            f"({row['exact_match_ci95'][0]:.0%}-{row['exact_match_ci95'][1]:.0%})  "
            f"{row['prompt_tokens_mean']} tokens  p50 {row['latency_p50_ms']} ms",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
