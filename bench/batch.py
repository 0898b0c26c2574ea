"""Batch throughput: ``fimble batch`` requests per second at widths 1 to 64 on one engine.

Short FIM requests cut from a real repository (this one's ``fimble/`` sources, or ``--repo``). Two
modes: ``lines`` (default) cuts each at a random line end of a random file, up to ``--lines`` lines
above as the prefix and a few below as the suffix, so prompts share little; ``files`` cuts many
requests from a few files (``--files``) with the prefix from the file's start, as ``fimble batch
--docstrings`` and an evaluation's lines of one file do, so their prompts share a head that the
batch evaluates once (cursors within ``--head-lines`` of the top, where the prefix budget keeps the
file's start). Every
width runs the same requests through the same runner and journal as the command (``run_batch``), on
one engine loaded with enough batch slots for the widest run, so the figures are ratios within one
run. Width 1 is the baseline (each request alone); the answers of each width are compared with it
(differences are only allowed after a counted near-tie). Prompt tokens evaluated and reused (a
cached or shared head) are reported per width. Writes JSON (default ``bench/results/batch.json``).
Run: ``.venv/bin/python bench/batch.py --n 32`` or ``... --mode files --widths 1,8,32,64``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fimble.batch import Journal, parse_items, run_batch  # noqa: E402
from fimble.completion.engine.loading import load_engine  # noqa: E402

MAX_WIDTH = 64  # batch slots: sequences 2 .. 65 of the context (llama.cpp allows 256 sequences)


def requests(
    repo: Path, n: int, lines: int, seed: int, max_tokens: int = 24, multiline: bool | None = None
) -> list[str]:
    rng = random.Random(seed)
    files = sorted(p for p in repo.rglob("*.py") if p.stat().st_size > 2000)
    out = []
    while len(out) < n:
        path = rng.choice(files)
        text = path.read_text(encoding="utf-8", errors="replace").split("\n")
        i = rng.randrange(lines, len(text) - 4)
        cur = text[i]
        if len(cur.strip()) < 8:
            continue
        out.append(_item(f"r{len(out)}", repo, path, text, i, i - lines, rng, max_tokens, multiline))
    return out


def _item(
    ident: str,
    repo: Path,
    path: Path,
    text: list[str],
    i: int,
    start: int,
    rng: random.Random,
    max_tokens: int,
    multiline: bool | None,
) -> str:
    """A request cut mid-way into line ``i`` of ``path``: the prefix from line ``start``, the suffix
    the rest of the line and three more, as a ``fimble batch`` input line."""
    cur = text[i]
    cut = len(cur) - len(cur.lstrip()) + rng.randrange(1, max(2, len(cur.strip()) // 2))
    prefix = "\n".join([*text[start:i], cur[:cut]])
    suffix = "\n".join([cur[cut:], *text[i + 1 : i + 4]])
    item = {"id": ident, "prefix": prefix, "suffix": suffix, "max_tokens": max_tokens}
    if multiline is not None:
        item["multiline"] = multiline
    return json.dumps(item | {"path": path.relative_to(repo).as_posix()})


def file_requests(
    repo: Path,
    n: int,
    files: int,
    head_lines: int,
    seed: int,
    max_tokens: int = 24,
    multiline: bool | None = None,
) -> list[str]:
    """``n`` requests from ``files`` files, the prefix from each file's start to a line within its
    first ``head_lines`` lines, so the requests of one file share their prompt's head."""
    rng = random.Random(seed)
    candidates = sorted(p for p in repo.rglob("*.py") if p.stat().st_size > 2000)
    chosen = rng.sample(candidates, min(files, len(candidates)))
    out: list[str] = []
    for k in range(n):
        path = chosen[k % len(chosen)]
        text = path.read_text(encoding="utf-8", errors="replace").split("\n")
        for _ in range(100):
            i = rng.randrange(1, min(head_lines, len(text) - 4))
            if len(text[i].strip()) >= 8:
                break
        out.append(_item(f"f{k}", repo, path, text, i, 0, rng, max_tokens, multiline))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--repo", type=Path, default=ROOT / "fimble")
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--lines", type=int, default=6, help="prefix lines above the cursor")
    parser.add_argument("--mode", choices=("lines", "files"), default="lines")
    parser.add_argument("--files", type=int, default=3, help="files mode: how many files")
    parser.add_argument("--head-lines", type=int, default=80, help="files mode: cursors within these lines")
    parser.add_argument("--widths", default="1,2,4,8,16", help=f"comma-separated, each 1 to {MAX_WIDTH}")
    parser.add_argument("--n-ctx", type=int, default=16384, help="KV cells shared by all sequences")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--multiline", action="store_true", help="ask for blocks, not the rest of a line")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/batch.json")
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    if not all(1 <= w <= MAX_WIDTH for w in widths):
        parser.error(f"--widths: each width must be 1 to {MAX_WIDTH}")
    multiline = args.multiline or None
    if args.mode == "files":
        lines = file_requests(
            args.repo, args.n, args.files, args.head_lines, args.seed, args.max_tokens, multiline
        )
    else:
        lines = requests(args.repo, args.n, args.lines, args.seed, args.max_tokens, multiline)
    batch_slots = max(widths) if max(widths) > 1 else 0
    engine = load_engine(args.model, threads=args.threads, n_ctx=args.n_ctx, batch_slots=batch_slots)
    runs: list[dict[str, Any]] = []
    answers: dict[int, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="fimble-batch-") as tmp:
        for width in widths:
            out = Path(tmp) / f"w{width}.jsonl"
            engine.reset()
            started = time.perf_counter()
            with Journal(out) as journal:
                summary = run_batch(engine, parse_items(lines), journal, width=width)
            wall = time.perf_counter() - started
            answers[width] = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
            base = answers[widths[0]]
            differ = [k for k, r in answers[width].items() if r.get("text") != base[k].get("text")]
            runs.append(
                {
                    "width": width,
                    "requests": summary.done,
                    "seconds": round(wall, 2),
                    "requests_per_s": round(summary.done / wall, 3),
                    "tokens_per_s": round(summary.tokens_generated / wall, 2),
                    "prompt_tokens": summary.prompt_tokens,
                    "tokens_evaluated": summary.tokens_evaluated,
                    "tokens_shared": summary.tokens_reused,  # a cached (width 1) or copied head
                    "tokens_generated": summary.tokens_generated,
                    "near_ties": summary.near_ties,
                    "differ_from_width_1": len(differ),
                    "differ_without_near_tie": sum(not answers[width][k].get("near_ties") for k in differ),
                }
            )
            print(json.dumps(runs[-1]), flush=True)
    base_rate = runs[0]["requests_per_s"]
    for run in runs:
        run["speedup"] = round(run["requests_per_s"] / base_rate, 2) if base_rate else None
    result = {
        "model": args.model,
        "threads": engine.threads,
        "requests": args.n,
        "mode": args.mode,
        "files": args.files if args.mode == "files" else None,
        "prefix_lines": args.lines if args.mode == "lines" else None,
        "n_ctx": args.n_ctx,
        "max_tokens": args.max_tokens,
        "multiline": args.multiline,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs": runs,
    }
    engine.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
