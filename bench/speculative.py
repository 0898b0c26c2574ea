"""Speculative (prompt-lookup) decoding against plain greedy decoding, on real completions.

Cursors are placed in real standard-library files (code the benchmark did not write): at the start
of a line whose content is removed (a multi-line completion, up to 64 tokens) or in the middle of a
line whose rest is removed (a single-line completion). Each completion runs through the service path
(FIM prompt, stop rules) twice from the same saved KV state, plain and speculative in alternating
order, and the outputs are compared (where they differ: plain decoding's margin at that token).
Also measures what a batch of n tokens costs at the end of a ~1,500-token cache (the price of
checking a draft). Writes JSON (default ``bench/results/speculative.json``). Run: ``make bench`` or
``.venv/bin/python bench/speculative.py``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import random
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import psutil

from fimble.completion.engine import Engine, EngineConfig, default_threads
from fimble.completion.prompt.fim import build_prompt
from fimble.completion.service import CompletionRequest, complete
from fimble.models import store

FILES = (
    "json/decoder.py",
    "textwrap.py",
    "csv.py",
    "shlex.py",
    "configparser.py",
    "dataclasses.py",
    "functools.py",
    "calendar.py",
    "difflib.py",
    "string.py",
    "http/cookies.py",
    "logging/handlers.py",
)


def _cases(rng: random.Random, path: Path, per_file: int) -> list[tuple[str, CompletionRequest]]:
    """Cursors in one file, top to bottom (so consecutive prompts share most of their KV)."""
    text = path.read_text()
    lines = text.split("\n")
    candidates = [i for i, ln in enumerate(lines) if i > 40 and len(ln.strip()) >= 12]
    out = []
    for n, i in enumerate(sorted(rng.sample(candidates, per_file))):
        line = lines[i]
        start = sum(len(x) + 1 for x in lines[:i])
        indent = len(line) - len(line.lstrip())
        if n % 2 == 0:  # a new line to write: multi-line
            kind, col = "block", indent
        else:  # finishing a line: single-line
            kind, col = "line", rng.randrange(indent + 4, len(line) - 2)
        doc = text[: start + col] + text[start + len(line) :]
        out.append((kind, CompletionRequest(text=doc, offset=start + col, path=str(path), max_tokens=64)))
    return out


def _prompt(engine: Engine, request: CompletionRequest) -> list[int]:
    """The prompt ``complete`` builds for ``request`` (same call, no warmer)."""
    return build_prompt(
        engine.tokenize,
        engine.fim,
        request.prefix,
        request.suffix,
        path=request.path,
        prefix_budget=request.prefix_budget,
        suffix_budget=request.suffix_budget,
    ).tokens


def _freeze(engine: Engine, prompt: list[int]) -> tuple[list[int], bytes]:
    """The KV state of ``prompt`` but its last token, to start every run of a case from.

    Runs must start from the same state: after a generation, llama.cpp places re-evaluated tokens
    in other KV cells, which changes the order of floating-point sums, and near-ties in greedy
    decoding can then tip either way (plain decoding twice in a row differs now and then too).
    """
    engine.prepare(prompt)
    snap = engine.snapshot(len(prompt) - 1)
    assert snap is not None
    return snap[0], bytes(snap[1])


def _thaw(engine: Engine, frozen: tuple[list[int], bytes]) -> None:
    tokens, blob = frozen
    ll = engine._ll
    ll.llama_memory_clear(engine._mem, True)
    buf = (ctypes.c_uint8 * len(blob)).from_buffer_copy(blob)
    if not ll.llama_state_seq_set_data(engine._ctx, buf, len(blob), 0):
        raise RuntimeError("llama.cpp refused the saved state")
    engine._cached = list(tokens)


def _run(
    engine: Engine, request: CompletionRequest, speculative: bool, frozen: tuple[list[int], bytes]
) -> dict[str, Any]:
    _thaw(engine, frozen)
    engine.speculative = speculative
    gen = complete(engine, request).generation
    return {
        "tokens": list(gen.tokens),
        "text": gen.text,
        "stop": gen.stop_reason,
        "ms": gen.generation_ms,
        "drafts": gen.drafts,
        "drafted": gen.drafted,
        "accepted": gen.accepted,
        "prompt": list(engine.cached_tokens[: gen.prompt_tokens]),
    }


def _plain_margin(
    engine: Engine, request: CompletionRequest, frozen: tuple[list[int], bytes], n: int
) -> float:
    """How far plain decoding's choice of output token ``n`` leads the runner-up, in logits."""
    _thaw(engine, frozen)
    engine.speculative = False
    complete(engine, CompletionRequest(**{**vars(request), "max_tokens": n}))
    np = engine._np
    logits = np.ctypeslib.as_array(engine._ll.llama_get_logits_ith(engine._ctx, -1), shape=(engine.n_vocab,))
    top2 = np.sort(logits)[-2:]
    return float(top2[1] - top2[0])


def _batch_costs(engine: Engine, tokens: list[int], at: int, repeats: int) -> dict[str, float]:
    """Milliseconds to decode n tokens after ``at`` cached ones, all with logits (a draft check)."""
    engine.reset()
    engine.prepare(tokens[:at])
    out = {}
    for n in range(1, 10):
        times = []
        for _ in range(repeats):
            cells = [(at + i, tokens[at + i]) for i in range(n)]
            t = time.perf_counter()
            engine._decode_all(cells)
            times.append(time.perf_counter() - t)
            engine._truncate_record(at)
        out[str(n)] = round(statistics.median(times) * 1000, 1)
    return out


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    plain_tok = sum(len(r["plain"]["tokens"]) for r in rows)
    plain_ms = sum(r["plain"]["ms"] for r in rows)
    spec_ms = sum(r["spec"]["ms"] for r in rows)
    drafted = sum(r["spec"]["drafted"] for r in rows)
    accepted = sum(r["spec"]["accepted"] for r in rows)
    plain_tps = plain_tok / plain_ms * 1000 if plain_ms else 0.0
    spec_tps = plain_tok / spec_ms * 1000 if spec_ms else 0.0
    return {
        "completions": len(rows),
        "tokens": plain_tok,
        "identical": sum(r["identical"] for r in rows),
        "divergent_plain_margins": [r["divergence"]["plain_margin"] for r in rows if r["divergence"]],
        "plain_tok_s": round(plain_tps, 1),
        "speculative_tok_s": round(spec_tps, 1),
        "speedup": round(spec_tps / plain_tps, 3) if plain_tps else None,
        "speedup_median_per_completion": round(
            statistics.median(r["plain"]["ms"] / r["spec"]["ms"] for r in rows if r["spec"]["ms"] > 0), 3
        ),
        "drafts": sum(r["spec"]["drafts"] for r in rows),
        "drafted": drafted,
        "accepted": accepted,
        "acceptance": round(accepted / drafted, 3) if drafted else 0.0,
        "tokens_from_drafts": round(accepted / plain_tok, 3) if plain_tok else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--files", type=int, default=len(FILES), help="how many of the stdlib files")
    parser.add_argument("--per-file", type=int, default=6, help="cursors per file")
    parser.add_argument("--repeats", type=int, default=3, help="for the batch cost")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--dump", type=Path, help="also write prompts' outputs (for tuning the policy)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/speculative.json"))
    args = parser.parse_args()

    path = store.resolve(args.model)
    threads = default_threads()
    engine = Engine(path, EngineConfig(threads=threads, n_ctx=4096))
    lib = Path(sysconfig.get_paths()["stdlib"])
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    loadavg_before = os.getloadavg()
    for f in FILES[: args.files]:
        engine.reset()
        for kind, request in _cases(rng, lib / f, args.per_file):
            order = (False, True) if len(rows) % 2 == 0 else (True, False)
            frozen = _freeze(engine, _prompt(engine, request))
            runs = {flag: _run(engine, request, flag, frozen) for flag in order}
            plain, spec = runs[False], runs[True]
            spec.pop("prompt")
            identical = (plain["tokens"], plain["text"], plain["stop"]) == (
                spec["tokens"],
                spec["text"],
                spec["stop"],
            )
            divergence = None
            if not identical:  # where, and by how much plain decoding led there (a near-tie?)
                n = next(
                    (
                        i
                        for i, (a, b) in enumerate(zip(plain["tokens"], spec["tokens"], strict=False))
                        if a != b
                    ),
                    min(len(plain["tokens"]), len(spec["tokens"])),
                )
                divergence = {"token": n, "plain_margin": round(_plain_margin(engine, request, frozen, n), 3)}
            rows.append(
                {
                    "divergence": divergence,
                    "prompt": plain.pop("prompt"),
                    "file": f,
                    "kind": kind,
                    "offset": request.offset,
                    "identical": identical,
                    "plain": plain,
                    "spec": spec,
                }
            )
            print(
                f"{f}:{request.offset} {kind:5} {len(plain['tokens']):2} tok "
                f"plain {plain['ms']:6.0f} ms spec {spec['ms']:6.0f} ms "
                f"acc {spec['accepted']}/{spec['drafted']} {'same' if identical else 'DIFFERENT'}",
                file=sys.stderr,
            )
    tokens = engine.tokenize((lib / "argparse.py").read_text())
    result: dict[str, Any] = {
        "bench": "speculative",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores_physical": psutil.cpu_count(logical=False),
            "loadavg_before": loadavg_before,
            "loadavg_after": os.getloadavg(),
        },
        "model": path.name,
        "threads": threads,
        "policy": {"max_draft": engine.draft_policy.max_draft, "min_chance": engine.draft_policy.min_chance},
        "all": _summary(rows),
        "block": _summary([r for r in rows if r["kind"] == "block"]),
        "line": _summary([r for r in rows if r["kind"] == "line"]),
        "batch_ms_at_1500": (costs := _batch_costs(engine, tokens, 1500, args.repeats)),
        "completions": [
            {k: v for k, v in r.items() if k not in ("plain", "spec", "prompt")}
            | {
                "tokens": len(r["plain"]["tokens"]),
                "plain_ms": round(r["plain"]["ms"], 1),
                "spec_ms": round(r["spec"]["ms"], 1),
                "drafted": r["spec"]["drafted"],
                "accepted": r["spec"]["accepted"],
                "stop": r["plain"]["stop"],
            }
            for r in rows
        ],
    }
    # Decoding steps saved, priced with the batch costs above: what the speed-up is on an idle machine
    # even when the wall-clock numbers were taken on a busy one.
    step, extra = costs["1"], (costs["9"] - costs["1"]) / 8
    for name in ("all", "block", "line"):
        summary = result[name]
        plain_cost = summary["tokens"] * step
        spec_cost = (summary["tokens"] - summary["accepted"]) * step + summary["drafted"] * extra
        summary["modeled_speedup"] = round(plain_cost / spec_cost, 3) if spec_cost else None
    result["batch_cost_model_ms"] = {"step": step, "per_draft_token": round(extra, 1)}
    engine.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "completions"}, indent=2))
    if args.dump:
        args.dump.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
