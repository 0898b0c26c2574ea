"""Does repository context show the model what a masked line needs? Measured without generating.

For masked lines that use a symbol defined in another file (``fimble eval``'s samples), the share
whose prompt context — the chunks the gatherer chose, as ``build_prompt`` packs them into the
context budget — mentions that symbol (``recall``), the share where it shows the symbol's
*definition* (``definition_recall``: ``def name``/``class name``/``name =``/``name:``, what the model
needs to call it right), and how many context tokens that costs. Each line's needed names also get
a *why not* (``missing``): already visible in the file's own prompt text, gathered but cut by the
token budget, or never gathered. Cheap (tokenizer only, no generation), so context selection can be
tuned on hundreds of lines before a slow ``fimble eval`` confirms it.

Results go into the JSON file (default ``bench/results/context_recall.json``) under ``--label``
(``after`` by default), keeping the other labels already there, so one file holds before and after.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from fimble.completion.engine.loading import load_engine
from fimble.completion.prompt.fim import CONTEXT_TOKENS, build_prompt
from fimble.evaluation.runner import EvalConfig, Prepared, open_index, prepare
from fimble.evaluation.sources import fetch_sdist, source_files


def _mentions(name: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def _defines(name: str, text: str) -> bool:
    return (
        re.search(rf"(\b(def|class)\s+{re.escape(name)}\b|^\s*(self\.)?{re.escape(name)}\s*[:=])", text, re.M)
        is not None
    )


def _measure(engine: Any, p: Prepared, context_tokens: int, prefix_tokens: int) -> dict[str, Any]:
    """One sample: which needed names the packed context mentions/defines, and why not the others."""
    prompt = build_prompt(
        engine.tokenize,
        engine.fim,
        p.text[: p.offset],
        p.text[p.offset :],
        path=p.sample.path,
        files=p.chunks,
        context_budget=context_tokens,
        prefix_budget=prefix_tokens,
    )
    kept = {(part.path, part.reason) for part in prompt.parts if part.kind == "context"}
    packed = [(reason, text) for path, text, reason in p.chunks if (path, reason) in kept]
    cut = [(reason, text) for path, text, reason in p.chunks if (path, reason) not in kept]
    own_parts = [part for part in prompt.parts if part.kind in ("prefix", "suffix")]
    own = engine.detokenize([t for part in own_parts for t in part.tokens])
    names: dict[str, str] = {}
    for name in p.sample.cross_file:
        if any(_defines(name, t) for _, t in packed):
            names[name] = "defined"
        elif any(_mentions(name, t) for _, t in packed):
            names[name] = "mentioned"
        elif any(_mentions(name, t) for _, t in cut):
            names[name] = "cut by budget"
        elif _mentions(name, own):
            names[name] = "in the file's prompt only"
        else:
            names[name] = "not gathered"
    first = next((r for r, t in packed for n in p.sample.cross_file if _mentions(n, t)), None)
    return {
        "id": p.sample.id,
        "truth": p.sample.truth,
        "names": names,
        "first_hit": first,
        "context_tokens": sum(len(part.tokens) for part in prompt.parts if part.kind == "context"),
        "context_ms": p.context_ms,
        "packed": [r for r, _ in packed],
        "cut": [r for r, _ in cut],
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = max(1, len(rows))
    reasons: dict[str, int] = {}
    missing: dict[str, int] = {}
    for r in rows:
        if r["first_hit"]:
            kind = r["first_hit"].split(":")[0].split(" (")[0].split(",")[0]
            kind = re.sub(r"^\S+ looks like a .*", "receiver looks like a class", kind)
            kind = re.sub(r"^\S+ is an? .*", "variable is a returned class", kind)
            kind = re.sub(r"^defines .*", "defines a symbol used near the cursor", kind)
            reasons[kind] = reasons.get(kind, 0) + 1
        for status in r["names"].values():
            if status not in ("defined", "mentioned"):
                missing[status] = missing.get(status, 0) + 1
    return {
        "cross_file_samples": len(rows),
        "recall": round(sum(bool({"defined", "mentioned"} & set(r["names"].values())) for r in rows) / n, 3),
        "definition_recall": round(sum("defined" in r["names"].values() for r in rows) / n, 3),
        "context_tokens_mean": round(sum(r["context_tokens"] for r in rows) / n, 1),
        "gather_ms_p50": sorted(r["context_ms"] for r in rows)[len(rows) // 2] if rows else 0.0,
        "first_hit_reason": reasons,
        "missing_names": missing,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pypi", action="append", default=[], help="NAME==VERSION (repeatable)")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--context-tokens", type=int, default=CONTEXT_TOKENS)
    ap.add_argument("--prefix-tokens", type=int, default=768, help="as `fimble eval --prefix-tokens`")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="only its tokenizer is used")
    ap.add_argument("--label", default="after", help="key the results are stored under (before/after)")
    ap.add_argument("--details", action="store_true", help="also store every sample's names and chunks")
    ap.add_argument("--out", type=Path, default=Path("bench/results/context_recall.json"))
    args = ap.parse_args()
    engine = load_engine(args.model, threads=1)
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    run: dict[str, Any] = {"samples": args.samples, "seed": args.seed, "context_tokens": args.context_tokens}
    for spec in args.pypi or ["requests==2.32.3"]:
        root = fetch_sdist(spec)
        files = source_files(root)
        index = open_index(root)
        try:
            config = EvalConfig(samples=args.samples, seed=args.seed, cross_share=1.0)
            prepared = prepare(index, files, config)
        finally:
            index.close()
        cross = [p for p in prepared if p.sample.cross_file]
        rows = [_measure(engine, p, args.context_tokens, args.prefix_tokens) for p in cross]
        run[spec] = _summary(rows)
        if args.details:
            run[spec]["details"] = rows
        print(spec, json.dumps({k: v for k, v in run[spec].items() if k != "details"}))
    run["when"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    results[args.label] = run
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
