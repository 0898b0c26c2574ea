"""Faults injected and survived: SIGKILL at random moments of indexing, a KV-state save and a
completion-cache write and a ``fimble batch`` run, twenty of each (``make faults``).

Each round is a real child process killed with SIGKILL after a random delay; then the store is
reopened and checked (``tests/reliability/faults.py``; the indexing rounds are those of
``tests/indexer/test_crash.py``: kill, reopen consistent, and after all rounds a build must equal a
clean build of the same tree). Writes JSON (default ``bench/results/faults.json``). Run under the
CPU lock: ``flock /tmp/team/cpu.lock python bench/faults.py``.
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

from tests.reliability.faults import as_json, batch_round, cache_round, kvstate_round  # noqa: E402


def _index_rounds(n: int, rng: random.Random, tmp: Path) -> dict[str, Any]:
    """SIGKILL ``fimble``'s indexer ``n`` times (pool and in-process passes alternately, the tree
    mutated between rounds); every kill must leave a store that opens consistent, and the survivor
    must converge to a clean build."""
    from fimble.indexer import IndexConfig, WorkspaceIndex
    from fimble.indexer.build import known_files
    from tests.indexer import test_crash as crash

    workspace, home = tmp / "ws", tmp / "home"
    crash._make_tree(workspace, seed=7)
    os.environ["FIMBLE_HOME"] = str(home)
    rounds = []
    for n_round in range(n):
        proc = crash._start_child(workspace, home, workers=2 if n_round % 2 else 0)
        delay = rng.uniform(0.0, 2.5)
        time.sleep(delay)
        crash._kill(proc)
        problem = None
        try:
            reader = WorkspaceIndex.open(workspace, IndexConfig(workers=0), writable=False)
        except Exception as err:
            if "no index yet" not in str(err):
                problem = f"does not open: {err}"
        else:
            with reader:
                stats = reader.stats()
                if stats.files != len(known_files(reader._store)):
                    problem = "file count disagrees with the records"
        rounds.append({"killed_after_s": round(delay, 3), "ok": problem is None, "problem": problem})
        if n_round % 2:
            crash._mutate(workspace, rng)
    with WorkspaceIndex.open(workspace, IndexConfig(workers=0)) as ix:
        ix.build()
        for i in range(7):
            ix.remove_file(f"churn/c{i}.py")
        ix.flush()
        crashed = crash._snapshot(ix)
    os.environ["FIMBLE_HOME"] = str(tmp / "clean-home")
    with WorkspaceIndex.open(workspace, IndexConfig(workers=0)) as ix:
        ix.build()
        clean = crash._snapshot(ix)
    return {"rounds": rounds, "converged_to_a_clean_build": crashed == clean}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/faults.json")
    parser.add_argument(
        "--only", choices=KINDS, action="append", help="Run these kinds only; the others' figures are kept."
    )
    args = parser.parse_args()
    kinds = args.only or list(KINDS)
    rng = random.Random(args.seed)
    result: dict[str, Any] = json.loads(args.out.read_text()) if args.only and args.out.exists() else {}
    with tempfile.TemporaryDirectory(prefix="fimble-faults-") as tmp_dir:
        tmp = Path(tmp_dir)
        if "kvstate" in kinds:
            result["kvstate"] = _counted([kvstate_round(tmp / "kv", rng) for _ in range(args.rounds)])
        if "completion_cache" in kinds:
            cache = [cache_round(tmp / "cache", rng, start=n * 1_000_000) for n in range(args.rounds)]
            result["completion_cache"] = _counted(cache)
        if "index" in kinds:
            index = _index_rounds(args.rounds, rng, tmp / "index")
            result["index"] = {
                "survived": sum(r["ok"] for r in index["rounds"]),
                "of": len(index["rounds"]),
                **index,
            }
        if "batch" in kinds:
            result["batch"] = _counted(
                [batch_round(tmp / f"batch{n}.jsonl", rng) for n in range(args.rounds)]
            )
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "system": platform.platform(),
    }
    result["seed"] = args.seed
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    summary = {k: (result[k]["survived"], result[k]["of"]) for k in KINDS if k in result}
    print(
        json.dumps({**summary, "index_converged": result.get("index", {}).get("converged_to_a_clean_build")})
    )


KINDS = ("kvstate", "completion_cache", "index", "batch")


def _counted(rounds: list[Any]) -> dict[str, Any]:
    return {"survived": sum(r.ok for r in rounds), "of": len(rounds), "rounds": as_json(rounds)}


if __name__ == "__main__":
    main()
