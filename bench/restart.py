"""First suggestion in a cold place: a newly opened large file, a file switched back to, a restart.

Through the ``Completer`` with the engine as the server loads it (KV state store on disk, small first
prompt, idle warm-up). Files are standard-library modules of the running interpreter (real code; the
default "new file" is argparse.py, 2,630 lines). For each scenario: latency from submit to answer,
tokens evaluated, tokens read back from disk, and whether a small first prompt answered. Writes JSON
(default ``bench/results/restart.json``). Run under ``flock /tmp/team/cpu.lock``.
"""

from __future__ import annotations

import argparse
import json
import os
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from fimble.completion.completer import Completer
from fimble.completion.engine import Engine
from fimble.completion.service import CompletionRequest
from fimble.completion.warmup import attach_warmup
from fimble.models import store


def _cursor(text: str, line: int) -> int:
    """After the indentation of ``line`` (0-based), or of the next non-blank line."""
    lines = text.split("\n")
    while not lines[line].strip():
        line += 1
    start = sum(len(ln) + 1 for ln in lines[:line])
    return start + len(lines[line]) - len(lines[line].lstrip())


def _ask(completer: Completer, path: Path, text: str, line: int, label: str) -> dict[str, Any]:
    engine = completer.worker.engine
    warmer = completer.worker.warmer
    assert engine is not None and warmer is not None
    restored, small = engine.tokens_restored, warmer.first_prompts
    offset = _cursor(text, line)
    request = CompletionRequest(text=text, offset=offset, path=path.name, max_tokens=24)
    t0 = time.perf_counter()
    result = completer.submit(request, key=str(path)).future.result()
    ms = (time.perf_counter() - t0) * 1000
    gen = result.generation
    row = {
        "scenario": label,
        "file": path.name,
        "line": line + 1,
        "latency_ms": round(ms, 1),
        "prompt_ms": round(gen.prompt_ms, 1),
        "generation_ms": round(gen.generation_ms, 1),
        "prompt_tokens": gen.prompt_tokens,
        "tokens_evaluated": gen.tokens_evaluated,
        "tokens_restored": engine.tokens_restored - restored,
        "restore_ms": engine.last_restore.get("ms") if engine.tokens_restored > restored else None,
        "small_first_prompt": warmer.first_prompts > small,
        "text": result.text,
    }
    print(json.dumps(row), flush=True)
    return row


def _settle(completer: Completer, timeout: float = 300.0) -> float:
    """Wait until the warm-up and the state saves are done (the user idle); returns seconds waited."""
    engine = completer.worker.engine
    warmer = completer.worker.warmer
    assert engine is not None and warmer is not None
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if not completer.worker.busy and not warmer.pending:
            break
        time.sleep(0.05)
    if engine.store is not None:
        engine.store.flush(timeout)
    return round(time.perf_counter() - t0, 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--out", type=Path, default=Path("bench/results/restart.json"))
    args = parser.parse_args()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    a, b = stdlib / "argparse.py", stdlib / "inspect.py"
    text_a, text_b = a.read_text(), b.read_text()
    model = store.resolve(args.model)
    state = Path(tempfile.mkdtemp(prefix="fimble-bench-kvstate-"))
    os.environ["FIMBLE_KV_STATE_DIR"] = str(state)

    def load() -> Engine:
        return Engine(model)

    rows: list[dict[str, Any]] = []
    settled: dict[str, float] = {}
    completer = Completer(load=load, prefetch=False, warmup=attach_warmup)
    assert completer.wait_ready(300)
    _settle(completer)  # the start-up speed measurement, as a server does long before the first request
    rows.append(_ask(completer, a, text_a, 1500, "new_file_first"))
    settled["warm_new_file_s"] = _settle(completer)
    rows.append(_ask(completer, a, text_a, 1502, "new_file_after_warmup"))
    _settle(completer)
    rows.append(_ask(completer, b, text_b, 2000, "other_file_first"))
    settled["warm_other_file_s"] = _settle(completer)
    rows.append(_ask(completer, a, text_a, 1504, "switch_back"))
    _settle(completer)
    engine = completer.worker.engine
    warmer = completer.worker.warmer
    assert engine is not None and engine.store is not None and warmer is not None
    speed = {"prompt_tps": warmer.speed.prompt_tps, "ms_per_token": warmer.speed.ms_per_token}
    stored = {"entries": len(engine.store.entries()), "bytes": engine.store.total_bytes}
    completer.close()
    completer = Completer(load=load, prefetch=False, warmup=attach_warmup)
    assert completer.wait_ready(300)
    _settle(completer)
    rows.append(_ask(completer, a, text_a, 1506, "after_restart"))
    rows.append(_ask(completer, b, text_b, 2003, "after_restart_other_file"))
    completer.close()
    out = {
        "model": args.model,
        "threads": engine.threads,
        "files": {"new": a.name, "new_lines": len(text_a.splitlines()), "other": b.name},
        "store": stored,
        "measured_speed": {k: round(v, 1) for k, v in speed.items()},
        "settle_s": settled,
        "requests": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
