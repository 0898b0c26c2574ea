"""Spaces before the cursor: a prompt ending in them, or one leaving them to the model.

``--where indent``: a cursor after a line's indentation (the line otherwise empty, as after Enter
in an editor). ``--where after-code``: a cursor after spaces that follow code (``return |``). The
same full prompt (fimble's layout and budgets, no repository context, Qwen2.5-Coder-1.5B, greedy) is
built twice: ``as_is`` ends the prefix with the spaces (fimble before ``prompt.heal``), ``healed``
ends it before them and the model writes them, which are then taken off (an answer not starting
with them counts as empty). Scored by exact match of the first line against what the file had, on
the places of served-evaluation cases (``fimble eval --out DIR`` writes ``DIR/cases.jsonl``, each
case with its blanked file text). Writes one row per place to ``--rows`` (resumed when it exists)
and the summary, with a two-sided sign test on the places where the two differ, to ``--out``.

    python bench/space_before_cursor.py R/cases.jsonl F/cases.jsonl X/cases.jsonl --where indent \\
        --rows bench/results/space_before_cursor/indent.jsonl \\
        --out bench/results/space_before_cursor_indent.json
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from fimble.completion.prompt.fim import build_prompt
from fimble.completion.prompt.heal import split_indent

Row = dict[str, Any]
_TRAILING = re.compile(r"[ \t]+$")


def split_space(prefix: str) -> tuple[str, str]:
    """``--where after-code``: the spaces ending a cursor line that has code before them (``x = |``)."""
    line = prefix[prefix.rfind("\n") + 1 :]
    m = _TRAILING.search(line)
    if m is None or not line.strip():
        return prefix, ""
    return prefix[: len(prefix) - len(m[0])], m[0]


SPLITS = {"indent": split_indent, "after-code": split_space}


def first_line_stop(text: str) -> tuple[str, int] | None:
    """Stop at the first line's end, after any leading indentation (an empty first line ends it)."""
    body = text.lstrip(" \t")
    lead = len(text) - len(body)
    if body.startswith("\n"):
        return ("empty_first_line", 0)
    j = body.find("\n")
    return ("newline", lead + j) if j >= 0 else None


def places(cases: list[Path], where: str) -> list[Row]:
    """The cases' places whose prefix ends in spaces of the kind ``where`` names, once each."""
    out: list[Row] = []
    seen: set[str] = set()
    split = SPLITS[where]
    for path in cases:
        for case in map(json.loads, path.open(encoding="utf-8")):
            if case["id"] in seen or (where == "indent" and case["position"] != "line_start"):
                continue
            prefix = case["text"][: case["offset"]]
            if split(prefix)[1]:
                seen.add(case["id"])
                out.append(case)
    return out


def sign_test(wins: int, losses: int) -> float:
    """Two-sided sign test: how likely a split this uneven is if neither layout were better."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def summary(rows: list[Row]) -> dict[str, Any]:
    wins = sum(r["healed"]["exact"] and not r["as_is"]["exact"] for r in rows)
    losses = sum(r["as_is"]["exact"] and not r["healed"]["exact"] for r in rows)
    per_source: dict[str, Counter[str]] = {}
    for r in rows:
        c = per_source.setdefault(r["source"], Counter())
        c["places"] += 1
        c["as_is"] += r["as_is"]["exact"]
        c["healed"] += r["healed"]["exact"]
    return {
        "places": len(rows),
        "as_is_exact": sum(r["as_is"]["exact"] for r in rows),
        "healed_exact": sum(r["healed"]["exact"] for r in rows),
        "healed_empty": sum(r["healed"]["pred"] is None for r in rows),
        "healed_wins": wins,
        "healed_losses": losses,
        "sign_test_p": round(sign_test(wins, losses), 4),
        "per_source": {k: dict(v) for k, v in per_source.items()},
        "cross_file": {
            "places": sum(r["cross_file"] for r in rows),
            "as_is_exact": sum(r["cross_file"] and r["as_is"]["exact"] for r in rows),
            "healed_exact": sum(r["cross_file"] and r["healed"]["exact"] for r in rows),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+", type=Path, help="cases.jsonl files of served evaluations")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument(
        "--where",
        choices=sorted(SPLITS),
        default="indent",
        help="indent: a cursor after a line's indentation; after-code: after spaces that follow code",
    )
    ap.add_argument("--rows", type=Path, required=True, help="one JSON row per place (resumed)")
    ap.add_argument("--out", type=Path, required=True, help="the summary (JSON)")
    args = ap.parse_args()

    rows = [json.loads(line) for line in args.rows.open(encoding="utf-8")] if args.rows.exists() else []
    done = {r["id"] for r in rows}
    todo = [c for c in places(args.cases, args.where) if c["id"] not in done]
    if todo:
        from fimble.completion.engine import Engine, EngineConfig
        from fimble.models import store

        engine = Engine(store.resolve(args.model), EngineConfig(n_ctx=4096))
        args.rows.parent.mkdir(parents=True, exist_ok=True)
        with args.rows.open("a", encoding="utf-8") as out:
            for i, case in enumerate(todo, 1):
                prefix, suffix = case["text"][: case["offset"]], case["text"][case["offset"] :]
                line_start, indent = SPLITS[args.where](prefix)
                row: Row = {k: case[k] for k in ("id", "source", "truth", "cross_file")} | {"indent": indent}
                for name, pre in (("as_is", prefix), ("healed", line_start)):
                    prompt = build_prompt(engine.tokenize, engine.fim, pre, suffix, path=case["path"])
                    text = engine.generate(prompt.tokens, max_tokens=48, stop=first_line_stop).text
                    shown: str | None = text
                    if name == "healed":
                        shown = text[len(indent) :] if text.startswith(indent) else None
                    pred = None if shown is None else shown.split("\n")[0].rstrip()
                    row[name] = {"raw": text, "pred": pred, "exact": pred == case["truth"].rstrip()}
                out.write(json.dumps(row) + "\n")
                out.flush()
                rows.append(row)
                print(f"{i}/{len(todo)} {row['id']}: {row['as_is']['exact']} -> {row['healed']['exact']}")
    cases = [str(p) for p in args.cases]
    result = {"model": args.model, "where": args.where, "cases": cases, **summary(rows)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
