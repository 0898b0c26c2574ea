"""The full-prompt ceiling beside the peer, on the same lines: issue 20's third goal.

``fimble eval --mode ceiling --context on --out DIR`` completes each sampled line once, at its ceiling
position, from its full prompt with repository context and no deadline, and writes
``DIR/samples.jsonl``. ``bench/peer_eval.py`` asks llama-server at the served run's places, which
include every ceiling position (a line's ``sample`` id) when both runs used the same ``--seed`` and
``--samples``. This scores both on those positions only, first pass (the peer's revisits left out),
per repository and pooled, for all lines and for the cross-file and same-file groups, with 95%
Wilson intervals. Writes JSON.

    python bench/ceiling_vs_peer.py DIR [DIR ...] --out bench/results/ceiling_vs_peer.json

Each DIR holds ``samples.jsonl`` (the ceiling) and one or more ``peer*.json`` (``peer_eval``'s
reports; every mode in them is a system). A ceiling line the peer did not ask is an error: the two
runs did not sample the same lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fimble.evaluation.served_report import GROUPS, wilson

Row = dict[str, Any]
_ROOT = Path(__file__).resolve().parents[1]


def ceiling_rows(run_dir: Path) -> list[Row]:
    """The ceiling's answers with repository context (one per sampled line)."""
    with open(run_dir / "samples.jsonl", encoding="utf-8") as f:
        return [r for r in map(json.loads, f) if r.get("context", True)]


def peer_rows(run_dir: Path, ids: set[str]) -> dict[str, list[Row]]:
    """Each peer mode's first-pass answers at the ceiling positions ``ids``, by system name."""
    out: dict[str, list[Row]] = {}
    for path in sorted(run_dir.glob("peer*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        for mode, entry in report["modes"].items():
            rows = [r for r in entry.get("rows", []) if r["id"] in ids and r["visit"] != "revisited"]
            missing = ids - {r["id"] for r in rows}
            if missing:
                raise SystemExit(
                    f"{path}: the peer did not ask {len(missing)} ceiling lines, e.g. {min(missing)}"
                )
            out[f"peer {mode}"] = rows
    return out


def scores(system: str, rows: Sequence[Row]) -> list[Row]:
    """Exact match per line group, with its interval and n."""
    out = []
    for group in GROUPS:
        chosen = [r for r in rows if group == "all" or bool(r["cross_file"]) == (group == "cross_file")]
        k = sum(bool(r["exact"]) for r in chosen)
        n = len(chosen)
        out.append(
            {
                "system": system,
                "group": group,
                "n": n,
                "exact": k,
                "exact_match": round(k / n, 4) if n else None,
                "exact_match_ci95": wilson(k, n),
            }
        )
    return out


def compare(run_dirs: Sequence[Path]) -> Row:
    pooled: dict[str, list[Row]] = {}
    per_repo: dict[str, list[Row]] = {}
    for run_dir in run_dirs:
        ceiling = ceiling_rows(run_dir)
        systems = {"fimble ceiling": ceiling, **peer_rows(run_dir, {r["id"] for r in ceiling})}
        per_repo[run_dir.name] = [e for name, rows in systems.items() for e in scores(name, rows)]
        for name, rows in systems.items():
            pooled.setdefault(name, []).extend(rows)
    return {
        "meta": {"runs": [str(d) for d in run_dirs]},
        "pooled": [e for name, rows in pooled.items() for e in scores(name, rows)],
        "per_repository": per_repo,
    }


def table(entries: Sequence[Row]) -> str:
    lines = [f"{'system':<16} {'group':<11} {'n':>4} {'EM':>6}  95% interval"]
    for e in entries:
        ci = e["exact_match_ci95"]
        em = "-" if e["exact_match"] is None else f"{e['exact_match']:.0%}"
        lines.append(
            f"{e['system']:<16} {e['group']:<11} {e['n']:>4} {em:>6}  "
            + ("" if ci is None else f"{ci[0]:.0%}-{ci[1]:.0%}")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="folders with samples.jsonl and peer*.json")
    parser.add_argument("--out", type=Path, default=_ROOT / "bench" / "results" / "ceiling_vs_peer.json")
    args = parser.parse_args(argv)
    report = compare(args.runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(report["pooled"]))
    for repo, entries in report["per_repository"].items():
        print(f"\n{repo}\n{table(entries)}")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
