"""Where fimble's served answers come from, and what each source gets right beside the peer.

At a new place the automatic request is answered by the small first prompt (its answer *adopted*
from the warmer), later by the full prompt, and mid-line mostly by the suggestion already shown
(*typed through*, *cached*). A gap against the peer is only actionable once it is known which of
these lost it. From one served run per repository (``fimble eval --mode served --out DIR`` with the
peer's rows beside, ``DIR/peer*.json``: ``bench/peer_eval.py``) this counts, per line group
(cross-file, same-file) x position (line start, mid-line), the automatic answers by source with
their exact matches, the invoked answers (which wait for the full prompt) and each peer mode's, on
the same places (first visits; ``--think-ms``, default 2000).

``--replay P,S`` also answers every line start again in-process from a P/S-token local window (no
repository context, no deadline, ``fimble.completion.service.complete``): the first prompt's own
answer, to tell what the prompt gets from what serving (deadlines, adoption, guides) makes of it.
About 3-4 s per line start with the 1.5B model on 2 cores.

    python bench/served_sources.py bench/results/served/*_xeonamx_seed3_similar --replay 256,128 \\
        --out bench/results/served_sources_seed3.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT))

from fimble.evaluation.served_report import wilson  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from served_pool import answered_by  # noqa: E402

Row = dict[str, Any]


def peer_rows(run: Path) -> dict[str, dict[str, Row]]:
    """Each peer mode's first-visit rows by case id."""
    out: dict[str, dict[str, Row]] = {}
    for f in sorted(run.glob("peer*.json")):
        for mode, data in json.loads(f.read_text(encoding="utf-8"))["modes"].items():
            out[mode] = {r["id"]: r for r in data["rows"] if r["visit"] != "revisited"}
    return out


def served_rows(run: Path, think_ms: int) -> tuple[dict[str, Row], dict[str, Row]]:
    """(automatic, invoked) first-visit rows by case id."""
    auto: dict[str, Row] = {}
    invoked: dict[str, Row] = {}
    for line in (run / "served.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r["think_ms"] == think_ms and r["visit"] != "revisited":
            (auto if r["request"] == "automatic" else invoked)[r["case"]] = r
    return auto, invoked


def replay(runs: list[Path], budgets: tuple[int, int], auto: dict[str, dict[str, Row]]) -> dict[str, Row]:
    """The line starts answered in-process from a local-window prompt of ``budgets`` tokens."""
    from tqdm import tqdm

    from fimble.completion.engine.loading import load_engine
    from fimble.completion.service import CompletionRequest, complete
    from fimble.evaluation.metrics import first_line, score

    cases = [
        (run.name, c)
        for run in runs
        for c in map(json.loads, (run / "cases.jsonl").read_text(encoding="utf-8").splitlines())
        if c["position"] == "line_start" and c["id"] in auto[run.name]
    ]
    engine = load_engine()
    out: dict[str, Row] = {}
    try:
        for name, c in tqdm(cases, desc="replaying line starts", unit="line"):
            request = CompletionRequest(
                text=c["text"],
                offset=c["offset"],
                path=c["path"],
                max_tokens=48,
                multiline=False,
                prefix_budget=budgets[0],
                suffix_budget=budgets[1],
                context_budget=0,
            )
            answer = first_line(complete(engine, request).text)
            out[f"{name}/{c['id']}"] = {"prediction": answer, "exact": score(answer, c["truth"]).exact}
    finally:
        engine.close()
    return out


def _shown(run: Path) -> str:
    """A run folder as the report names it: relative to the checkout when it lies in one."""
    for root in (_ROOT, Path.cwd()):
        try:
            return str(run.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(run)


def cell(hits: int, n: int) -> dict[str, Any]:
    lo, hi = wilson(hits, n)
    return {"exact": hits, "n": n, "rate": round(hits / n, 3) if n else None, "ci95": [lo, hi]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "runs", nargs="+", type=Path, help="served run folders (served.jsonl, cases.jsonl, peer*.json)"
    )
    ap.add_argument("--think-ms", type=int, default=2000)
    ap.add_argument(
        "--replay", metavar="P,S", help="also answer line starts in-process from a P/S local window"
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    auto: dict[str, dict[str, Row]] = {}
    invoked: dict[str, dict[str, Row]] = {}
    peers: dict[str, dict[str, dict[str, Row]]] = {}
    for run in args.runs:
        auto[run.name], invoked[run.name] = served_rows(run, args.think_ms)
        peers[run.name] = peer_rows(run)
    replayed: dict[str, Row] = {}
    if args.replay:
        p, s = (int(x) for x in args.replay.split(","))
        replayed = replay(args.runs, (p, s), auto)

    counts: Counter[tuple[str, ...]] = Counter()
    differ: list[Row] = []
    for run in args.runs:
        for case, r in auto[run.name].items():
            group = ("cross-file" if r["cross_file"] else "same-file", r["position"])
            src = answered_by(r)  # small prompt, full prompt, cache, empty
            counts[(*group, "automatic", "n")] += 1
            counts[(*group, "automatic", "exact")] += r["exact"]
            counts[(*group, f"automatic, {src}", "n")] += 1
            counts[(*group, f"automatic, {src}", "exact")] += r["exact"]
            if (inv := invoked[run.name].get(case)) is not None:
                counts[(*group, "invoked", "n")] += 1
                counts[(*group, "invoked", "exact")] += inv["exact"]
            for mode, rows in peers[run.name].items():
                if case in rows:
                    counts[(*group, f"peer {mode}", "n")] += 1
                    counts[(*group, f"peer {mode}", "exact")] += rows[case]["exact"]
            if (again := replayed.get(f"{run.name}/{case}")) is not None:
                counts[(*group, "replayed first prompt", "n")] += 1
                counts[(*group, "replayed first prompt", "exact")] += again["exact"]
                if again["exact"] != r["exact"]:
                    differ.append(
                        {
                            "run": run.name,
                            "case": case,
                            "truth": r["truth"],
                            "served": r["prediction"],
                            "served_source": src,
                            "replayed": again["prediction"],
                        }
                    )
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for group, position, system, what in counts:
        if what == "n":
            key = f"{group} {position}"
            table.setdefault(key, {})[system] = cell(
                counts[(group, position, system, "exact")], counts[(group, position, system, "n")]
            )
    report = {
        "runs": [_shown(run) for run in args.runs],
        "think_ms": args.think_ms,
        "replay_budgets": args.replay,
        "by_group_and_position": table,
        "replayed_differs_from_served": differ,
    }
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for key, systems in table.items():
        print(key)
        for system, c in systems.items():
            print(f"  {system:36} {c['exact']:3}/{c['n']:<3} {c['rate']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
