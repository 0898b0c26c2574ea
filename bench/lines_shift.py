"""After a jump within a file: the lines both prompts show moved in the KV cache, or read again.

For each line start of served-evaluation cases (``fimble eval --out DIR`` writes ``DIR/cases.jsonl``),
the cache first holds the full prompt of another place in the same file, ``--jump`` lines away (the
cursor at that line's end), as after working there; then the place's own full prompt (fimble's
layout and budgets, no repository context, the indentation left to the model as served) is
completed twice, greedy, Qwen2.5-Coder-1.5B:

* ``moved``: the engine moves the runs of the file's lines that the cache holds into place
  (``Slot.plan``'s lines reuse) and evaluates the rest;
* ``fresh``: from an empty cache, every token evaluated.

Since eb5b1d8 lines only move left (``kvplan.plan_reuse``), so a positive ``--jump`` (the other
place below: the prefix now starts higher) moves nothing and both ways agree;
``bench/results/lines_shift.json`` was measured with 6659ade's engine, which moved them both ways.

Each row keeps both answers' first lines, exact match against what the file had, and the tokens
evaluated. The summary counts identical answers, exact matches each way with a two-sided sign test,
and the tokens evaluated: what moving spares, and what its approximation (KV computed after other
lines than the new prompt has before them) costs. Writes rows to ``--rows`` (resumed) and the
summary to ``--out``.

    python bench/lines_shift.py R/cases.jsonl F/cases.jsonl X/cases.jsonl --jump 24 --jump -24 \\
        --rows bench/results/lines_shift/rows.jsonl --out bench/results/lines_shift.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from space_before_cursor import first_line_stop, sign_test

from fimble.completion.prompt.fim import build_prompt
from fimble.completion.prompt.heal import heal_guide, healed_stop, split_indent, unheal

Row = dict[str, Any]


def places(cases: list[Path], jumps: list[int], limit: int | None) -> list[Row]:
    """Each line start once per jump whose other line exists, as (case, the other line)."""
    out: list[Row] = []
    seen: set[tuple[str, int]] = set()
    for path in cases:
        per_file = 0
        for case in map(json.loads, path.open(encoding="utf-8")):
            if case["position"] != "line_start" or (limit is not None and per_file >= limit):
                continue
            n_lines = case["text"].count("\n") + 1
            for jump in jumps:
                other = case["line"] + jump
                if (case["id"], jump) in seen or not 0 <= other < n_lines:
                    continue
                seen.add((case["id"], jump))
                out.append({"case": case, "jump": jump, "other": other})
            per_file += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+", type=Path, help="cases.jsonl files of served evaluations")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--jump", type=int, action="append", help="lines from the other place (repeatable)")
    ap.add_argument("--per-source", type=int, default=None, help="at most this many line starts per file")
    ap.add_argument("--rows", type=Path, required=True, help="one JSON row per place and jump (resumed)")
    ap.add_argument("--out", type=Path, required=True, help="the summary (JSON)")
    args = ap.parse_args()
    jumps = args.jump or [24, -24]

    rows = [json.loads(line) for line in args.rows.open(encoding="utf-8")] if args.rows.exists() else []
    done = {(r["id"], r["jump"]) for r in rows}
    todo = [p for p in places(args.cases, jumps, args.per_source) if (p["case"]["id"], p["jump"]) not in done]
    if todo:
        from fimble.completion.engine import Engine, EngineConfig
        from fimble.models import store

        engine = Engine(store.resolve(args.model), EngineConfig(n_ctx=4096))
        args.rows.parent.mkdir(parents=True, exist_ok=True)
        with args.rows.open("a", encoding="utf-8") as out:
            for i, place in enumerate(todo, 1):
                case = place["case"]
                text = case["text"]
                lines = text.split("\n")
                other_end = sum(len(line) + 1 for line in lines[: place["other"]]) + len(
                    lines[place["other"]]
                )
                before = build_prompt(
                    engine.tokenize, engine.fim, text[:other_end], text[other_end:], path=case["path"]
                )
                line_start, indent = split_indent(text[: case["offset"]])
                prompt = build_prompt(
                    engine.tokenize, engine.fim, line_start, text[case["offset"] :], path=case["path"]
                )
                row: Row = {k: case[k] for k in ("id", "source", "truth", "cross_file")}
                row |= {"jump": place["jump"], "prompt_tokens": len(prompt.tokens)}
                for name in ("moved", "fresh"):
                    engine.reset()
                    if name == "moved":
                        engine.prepare(before.tokens, None, before.stable_len)
                    t0 = time.perf_counter()
                    gen = engine.generate(
                        prompt.tokens,
                        max_tokens=48,
                        stop=healed_stop(first_line_stop, indent),
                        reuse_limit=prompt.stable_len,
                        guide=heal_guide(indent, None),
                    )
                    pred = unheal(gen.text, indent).split("\n")[0].rstrip()
                    row[name] = {
                        "pred": pred,
                        "exact": pred == case["truth"].rstrip(),
                        "evaluated": gen.tokens_evaluated,
                        "ms": round((time.perf_counter() - t0) * 1000),
                    }
                row["same"] = row["moved"]["pred"] == row["fresh"]["pred"]
                out.write(json.dumps(row) + "\n")
                out.flush()
                rows.append(row)
                m, f = row["moved"], row["fresh"]
                print(
                    f"{i}/{len(todo)} {row['id']} {row['jump']:+d}:"
                    f" evaluated {m['evaluated']}/{f['evaluated']} exact {m['exact']}/{f['exact']}"
                    f" same {row['same']}",
                    flush=True,
                )
    result = {"model": args.model, "cases": [str(p) for p in args.cases], "jumps": jumps, **summary(rows)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def summary(rows: list[Row]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for jump in [*sorted({r["jump"] for r in rows}), "all"]:
        part = [r for r in rows if jump == "all" or r["jump"] == jump]
        wins = sum(r["moved"]["exact"] and not r["fresh"]["exact"] for r in part)
        losses = sum(r["fresh"]["exact"] and not r["moved"]["exact"] for r in part)
        out[str(jump)] = {
            "places": len(part),
            "same_answer": sum(r["same"] for r in part),
            "moved_exact": sum(r["moved"]["exact"] for r in part),
            "fresh_exact": sum(r["fresh"]["exact"] for r in part),
            "moved_wins": wins,
            "moved_losses": losses,
            "sign_test_p": round(sign_test(wins, losses), 4),
            "evaluated_moved_mean": round(sum(r["moved"]["evaluated"] for r in part) / max(1, len(part)), 1),
            "evaluated_fresh_mean": round(sum(r["fresh"]["evaluated"] for r in part) / max(1, len(part)), 1),
            "ms_moved_mean": round(sum(r["moved"]["ms"] for r in part) / max(1, len(part))),
            "ms_fresh_mean": round(sum(r["fresh"]["ms"] for r in part) / max(1, len(part))),
        }
    return out


if __name__ == "__main__":
    main()
