"""What the syntax-aware shape and stop rules change on real code with the real model.

For cursors in standard-library modules (the end of block headers, the middle of lines, the end of
lines inside calls), the same prompt is completed twice on one engine: with fimble's rules, and with
the rules before them (shape from a text heuristic; stops at a newline, a repeated suffix line, a
dedent below the cursor's line). Reports tokens generated, generation time, stop reasons, and how
often the shown suggestion would duplicate a closing bracket or quote already after the cursor.
Writes JSON (default ``bench/results/stops.json``). Run under the CPU lock:
``flock /tmp/team/cpu.lock .venv/bin/python bench/stops.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sysconfig
import time
from pathlib import Path
from typing import Any

from fimble.completion.engine import Engine, EngineConfig
from fimble.completion.output.postprocess import clean_completion
from fimble.completion.output.shape import analyze, stop_context, text_heuristic
from fimble.completion.output.stops import (
    StopContext,
    first_line_stop,
    indent_stop,
    make_stop_check,
    suffix_repeat_stop,
)
from fimble.completion.prompt.fim import build_prompt
from fimble.models import store

_MODULES = ("argparse.py", "csv.py", "textwrap.py", "shutil.py", "json/decoder.py", "logging/handlers.py")


def _positions(text: str, rng: random.Random, per_kind: int) -> list[tuple[str, int]]:
    """(kind, offset): ends of block headers, middles of lines inside calls, ends of lines."""
    kinds: dict[str, list[int]] = collections.defaultdict(list)
    offset = 0
    for line in text.split("\n"):
        body = line.strip()
        if body.endswith(":") and body.split(" ", 1)[0] in (
            "def",
            "if",
            "for",
            "while",
            "with",
            "try",
            "else:",
        ):
            kinds["block header"].append(offset + len(line))
        elif "(" in body and body.endswith(")") and len(body) > 20 and not body.startswith(("#", '"', "'")):
            kinds["inside a call"].append(offset + line.index("(") + 1)
        elif len(body) > 12 and not body.startswith(("#", '"', "'")) and not body.endswith((",", "(", "\\")):
            kinds["mid-line"].append(offset + len(line) - len(body) + len(body) // 2)
        offset += len(line) + 1
    out = []
    for kind, offsets in sorted(kinds.items()):
        out += [(kind, o) for o in rng.sample(offsets, min(per_kind, len(offsets)))]
    return out


def _duplicates(prefix: str, text: str, suffix: str) -> bool:
    """Whether the cursor's line ends up with more closers than openers (a duplicated ``)``/``"``)."""
    line = prefix[prefix.rfind("\n") + 1 :] + text.split("\n")[-1] + suffix.split("\n", 1)[0]
    if text.count("\n"):
        return False
    depth = 0
    for ch in line:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return True
    return line.count('"') % 2 == 1


def _run(engine: Engine, prompt: list[int], ctx: StopContext, rules: tuple | None, max_tokens: int) -> dict:
    check = make_stop_check(ctx) if rules is None else make_stop_check(ctx, rules)
    gen = engine.generate(prompt, max_tokens=max_tokens, stop=check)
    return {
        "tokens": len(gen.tokens),
        "ms": gen.generation_ms,
        "stop": gen.stop_reason,
        "text": clean_completion(gen.text, ctx),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--per-kind", type=int, default=3, help="cursors of each kind per module")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--modules", type=int, default=len(_MODULES))
    ap.add_argument("--prefix-tokens", type=int, default=512, help="a short prefix keeps each cursor cheap")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "stops.json")
    args = ap.parse_args()

    lib = Path(sysconfig.get_paths()["stdlib"])
    rng = random.Random(args.seed)
    engine = Engine(store.resolve(args.model), EngineConfig(n_ctx=4096))
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for name in _MODULES[: args.modules]:
        text = (lib / name).read_text()
        for kind, offset in _positions(text, rng, args.per_kind):
            prefix, suffix = text[:offset], text[offset:]
            prompt = build_prompt(
                engine.tokenize, engine.fim, prefix, suffix, path=name, prefix_budget=args.prefix_tokens
            ).tokens
            syntax = analyze(prefix, suffix, "python")
            new = _run(engine, prompt, stop_context(prefix, suffix, syntax), None, args.max_tokens)
            old_multi, _ = text_heuristic(prefix, suffix)
            old_ctx = StopContext(prefix[prefix.rfind("\n") + 1 :], suffix, old_multi)
            old = _run(
                engine, prompt, old_ctx, (first_line_stop, suffix_repeat_stop, indent_stop), args.max_tokens
            )
            new["duplicates"] = _duplicates(prefix, new["text"], suffix)
            old["duplicates"] = _duplicates(prefix, old["text"], suffix)
            rows.append({"module": name, "kind": kind, "shape": syntax.reason, "new": new, "old": old})

    def summary(key: str, subset: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "tokens_total": sum(r[key]["tokens"] for r in subset),
            "tokens_median": statistics.median(r[key]["tokens"] for r in subset),
            "generation_ms_total": round(sum(r[key]["ms"] for r in subset)),
            "duplicated_closer": sum(r[key]["duplicates"] for r in subset),
            "at_token_limit": sum(r[key]["stop"] == "max_tokens" for r in subset),
            "stops": dict(collections.Counter(r[key]["stop"] for r in subset).most_common()),
        }

    result: dict[str, Any] = {
        "model": args.model,
        "threads": engine.threads,
        "cursors": len(rows),
        "max_tokens": args.max_tokens,
        "new": summary("new", rows),
        "old": summary("old", rows),
        "by_kind": {
            kind: {"new": summary("new", sub), "old": summary("old", sub)}
            for kind in sorted({r["kind"] for r in rows})
            if (sub := [r for r in rows if r["kind"] == kind])
        },
        "same_suggestion": sum(r["new"]["text"] == r["old"]["text"] for r in rows),
        "examples": [
            {"module": r["module"], "kind": r["kind"], "new": r["new"]["text"], "old": r["old"]["text"]}
            for r in rows
            if r["new"]["text"] != r["old"]["text"]
        ][:12],
        "wall_s": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "examples"}, indent=2))


if __name__ == "__main__":
    main()
