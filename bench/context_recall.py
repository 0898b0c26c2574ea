"""Does repository context show the model what a masked line needs? Measured without generating.

For masked lines that use a symbol defined in another file (``fimble eval``'s samples), the share
whose prompt context — the chunks the gatherer chose, as ``build_prompt`` packs them into the
context budget — mentions that symbol (``recall``), the share where it shows the symbol's
*definition* (``definition_recall``: ``def name``/``class name``/``name =``, what the model needs
to call it right), and how many context tokens that costs. Cheap (tokenizer
only, no generation), so context selection can be tuned on hundreds of lines before a slow
``fimble eval`` confirms it. Writes JSON (default ``bench/results/context_recall.json``).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from fimble.completion.fim import CONTEXT_TOKENS, build_prompt
from fimble.completion.loading import load_engine
from fimble.evaluation.runner import EvalConfig, open_index, prepare
from fimble.evaluation.sources import fetch_sdist, source_files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pypi", action="append", default=[], help="NAME==VERSION (repeatable)")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--context-tokens", type=int, default=CONTEXT_TOKENS)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="only its tokenizer is used")
    ap.add_argument("--out", type=Path, default=Path("bench/results/context_recall.json"))
    args = ap.parse_args()
    engine = load_engine(args.model, threads=1)
    results: dict[str, Any] = {"context_tokens": args.context_tokens, "sources": {}}
    for spec in args.pypi or ["requests==2.32.3"]:
        root = fetch_sdist(spec)
        files = source_files(root)
        index = open_index(root)
        try:
            config = EvalConfig(samples=args.samples, seed=args.seed, cross_share=1.0)
            prepared = prepare(index, files, config)
        finally:
            index.close()
        hits = defined = used = 0
        reasons: dict[str, int] = {}
        cross = [p for p in prepared if p.sample.cross_file]
        for p in cross:
            prompt = build_prompt(
                engine.tokenize, engine.fim, p.text[: p.offset], p.text[p.offset :], path=p.sample.path,
                files=p.chunks, context_budget=args.context_tokens,
            )
            kept = {(part.path, part.reason) for part in prompt.parts if part.kind == "context"}
            texts = [(reason, text) for path, text, reason in p.chunks if (path, reason) in kept]
            used += sum(len(part.tokens) for part in prompt.parts if part.kind == "context")
            found = [
                reason for reason, text in texts
                for name in p.sample.cross_file if re.search(rf"\b{re.escape(name)}\b", text)
            ]
            definition = [
                name for _, text in texts for name in p.sample.cross_file
                if re.search(rf"(\b(def|class)\s+{re.escape(name)}\b|^\s*{re.escape(name)}\s*[:=])",
                             text, re.M)
            ]
            defined += bool(definition)
            if found:
                hits += 1
                kind = found[0].split(":")[0].split(" (")[0].split(",")[0]
                reasons[kind] = reasons.get(kind, 0) + 1
        results["sources"][spec] = {
            "cross_file_samples": len(cross),
            "recall": round(hits / max(1, len(cross)), 3),
            "definition_recall": round(defined / max(1, len(cross)), 3),
            "context_tokens_mean": round(used / max(1, len(cross)), 1),
            "first_hit_reason": reasons,
        }
        print(spec, results["sources"][spec])
    results["when"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
