"""fimble as served and the peer, pooled over several repositories' runs of ``bench/peer_eval.py``.

One ``fimble eval --mode served --out DIR`` and one ``bench/peer_eval.py --cases DIR/cases.jsonl
--out DIR/peer.json`` per repository give each system's answers at the same places (every
``DIR/peer*.json`` is read, so a mode run later can lie beside as ``peer_bm25.json``); a row per
repository is too few lines for an interval that tells systems apart, so this pools them: every
system (fimble per think time and request kind, the peer per mode) x line group (all, cross-file,
same-file) x visit, with the same statistics ``peer_eval`` reports (exact match with a 95% Wilson
interval, empty answers, latency p50/p90), plus each repository's own rows. Writes JSON.

    python bench/served_pool.py DIR [DIR ...] --out bench/results/served_vs_peer.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_eval import fimble_rows, summary, table

Row = dict[str, Any]
_ROOT = Path(__file__).resolve().parents[1]


def system_rows(run_dir: Path) -> dict[str, list[Row]]:
    """Every system's scored rows at one repository's places: the peer's modes and fimble's."""
    out: dict[str, list[Row]] = {}
    ids: set[str] = set()
    for path in sorted(run_dir.glob("peer*.json")):  # peer.json, and modes run later (peer_bm25.json)
        report = json.loads(path.read_text(encoding="utf-8"))
        for mode, entry in report["modes"].items():
            rows = entry.get("rows", [])
            ids.update(r["id"] for r in rows)
            out[f"peer {mode}"] = rows
    for name, rows in fimble_rows(run_dir / "served.jsonl", ids).items():
        out[name] = rows
    return out


def answered_by(row: Row) -> str:
    """Which part of fimble gave a served answer: nothing, the typed-through or completion cache,
    the small first prompt of a cold place (shown ones included), or the full prompt."""
    server = row.get("server") or {}
    if row.get("empty"):
        return "empty"
    if server.get("stop_reason") in ("typed_through", "cached"):
        return "cache"
    return "small prompt" if row.get("small_first_prompt") else "full prompt"


def by_source(rows: Sequence[Row]) -> dict[str, Row]:
    """Exact match of fimble's first-pass answers per ``answered_by``: where the misses come from."""
    out: dict[str, Row] = {}
    for row in rows:
        if row.get("visit") == "revisited":
            continue
        entry = out.setdefault(answered_by(row), {"n": 0, "exact": 0})
        entry["n"] += 1
        entry["exact"] += bool(row["exact"])
    return out


def pool(run_dirs: Sequence[Path]) -> Row:
    pooled: dict[str, list[Row]] = {}
    per_repo: dict[str, list[Row]] = {}
    for run_dir in run_dirs:
        entries: list[Row] = []
        for name, rows in system_rows(run_dir).items():
            pooled.setdefault(name, []).extend(rows)
            entries.extend(e for e in summary(name, rows) if e["position"] == "all")
        per_repo[run_dir.name] = entries
    return {
        "meta": {"runs": [str(d) for d in run_dirs]},
        "pooled": [e for name, rows in pooled.items() for e in summary(name, rows)],
        "answered_by": {name: by_source(rows) for name, rows in pooled.items() if name.startswith("fimble")},
        "per_repository": per_repo,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="fimble eval --out DIRs, each with peer.json")
    parser.add_argument("--out", type=Path, default=_ROOT / "bench" / "results" / "served_vs_peer.json")
    args = parser.parse_args(argv)
    report = pool(args.runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(report["pooled"]))
    for name, sources in report["answered_by"].items():
        parts = ", ".join(f"{k} {v['exact']}/{v['n']}" for k, v in sorted(sources.items()))
        print(f"{name}: exact by what answered: {parts}")
    for repo, entries in report["per_repository"].items():
        print(f"\n{repo}\n{table([e for e in entries if e['visit'] == 'first_pass'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
