"""Does an edited index rank like a fresh one, and what does a search cost with stale postings?

Replaced file versions keep their postings until compaction (the ``dead`` fids). This benchmark
indexes a big tree (the interpreter's standard library, as ``bench/index.py`` does: about 2,400
files), then edits it the way ``fimble eval`` does: ``--edits`` times, a random Python file gets one
line blanked through ``update_buffer``, and at the end every touched file is restored from disk. The
tree's content is then the one on disk again, so a second index of the same tree built from scratch
should give the very same search results. Measured over ``--queries`` random searches (the 12 lines
above a random line, that region excluded, k=4, as the completion path asks):

* ``drift``: the share of queries whose top-4 windows differ between the edited and the fresh index,
  the share whose first window differs, and the largest score difference of a window both return;
* ``search_ms``: p50/p99 of one search on the edited index (stale entries present) and on the fresh
  one (none), each query timed ``--repeat`` times (the median kept), plus the load average.

With ``--compare-with OLD/bm25.py`` (say, from a worktree of an older commit), the same queries
also run on the edited index through that module's ``search`` and this one's, interleaved query by
query in one process (``search_ms_interleaved``): on a shared machine, load changes between two runs
move the numbers more than the code does.

Results go into the JSON file (default ``bench/results/bm25_stale.json``) under ``--label``, keeping
the other labels already there. Run: ``.venv/bin/python bench/bm25_stale.py --label after``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000, 3)

    return {
        "n": len(ordered),
        "p50_ms": pick(0.5),
        "p99_ms": pick(0.99),
        "mean_ms": round(statistics.mean(ordered) * 1000, 3),
    }


def _open(root: Path, home: Path) -> Any:
    from fimble.indexer import IndexConfig, WorkspaceIndex

    os.environ["FIMBLE_HOME"] = str(home)
    ix = WorkspaceIndex.open(root, IndexConfig(worker_nice=0))
    ix.build()
    return ix


def _edit_like_eval(ix: Any, root: Path, files: list[str], edits: int, rng: random.Random) -> None:
    """One blanked line per sample via update_buffer, every touched file restored at the end."""
    touched: set[str] = set()
    for _ in range(edits):
        rel = rng.choice(files)
        lines = (root / rel).read_text(errors="replace").split("\n")
        line = rng.randrange(len(lines))
        lines[line] = ""
        ix.update_buffer(root / rel, "\n".join(lines))
        ix.flush()
        touched.add(rel)
    for rel in touched:
        ix.update_file(root / rel)
    ix.flush(maintenance=True)


def _queries(
    root: Path, files: list[str], n: int, rng: random.Random
) -> list[tuple[str, str, tuple[int, int]]]:
    out = []
    for _ in range(n):
        rel = rng.choice(files)
        lines = (root / rel).read_text(errors="replace").split("\n")
        line = rng.randrange(len(lines))
        out.append((rel, "\n".join(lines[max(0, line - 12) : line + 1]), (max(0, line - 60), line + 60)))
    return out


def _search_all(ix: Any, queries: list, repeat: int) -> tuple[list[tuple], list[float]]:
    ix.search("warm up numpy")
    results, times = [], []
    for rel, text, span in queries:
        runs = []
        for _ in range(repeat):
            started = time.perf_counter()
            hits = ix.search(text, k=4, exclude=(rel, span))
            runs.append(time.perf_counter() - started)
        results.append(hits)
        times.append(statistics.median(runs))
    return results, times


def _interleaved(ix: Any, queries: list, other: Path, repeat: int) -> dict[str, Any]:
    """p50/p99 of this tree's ``bm25.search`` and of ``other``'s, alternating on every query (and
    which one goes first: the second search of the same text finds warmer caches)."""
    import importlib.util

    from fimble.indexer import bm25

    spec = importlib.util.spec_from_file_location("bm25_other", other)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    times: dict[str, list[float]] = {"this": [], "other": []}
    db = ix._store.db
    with ix._store.read() as txn:
        for _ in range(repeat):
            for n, (rel, text, span) in enumerate(queries):
                pair = (("this", bm25), ("other", old))
                for name, module in pair if n % 2 else pair[::-1]:  # the second run of a query is warmer
                    started = time.perf_counter()
                    module.search(txn, db, text, 4, exclude=(rel, span))
                    times[name].append(time.perf_counter() - started)
    return {"other": str(other), **{name: _percentiles(t) for name, t in times.items()}}


def _drift(edited: list[tuple], fresh: list[tuple]) -> dict[str, float]:
    """How the edited index's results differ from the fresh one's. Windows of equal score come in fid
    order, and files get other fids in an edited index: ``*_windows_differ`` counts those ties too,
    ``*_scores_differ``/``top1`` only real differences (a score at that rank off by > 0.001)."""
    windows = scores = first = 0
    worst = 0.0
    for a, b in zip(edited, fresh, strict=True):
        wa = [(h.path, h.start_line, h.end_line) for h in a]
        wb = [(h.path, h.start_line, h.end_line) for h in b]
        sa, sb = [h.score for h in a], [h.score for h in b]
        windows += set(wa) != set(wb)
        scores += len(sa) != len(sb) or any(abs(x - y) > 1e-3 for x, y in zip(sa, sb, strict=True))
        first += bool(sa) != bool(sb) or bool(sa and sb and abs(sa[0] - sb[0]) > 1e-3)
        common = {w: h.score for w, h in zip(wb, b, strict=True)}
        for w, h in zip(wa, a, strict=True):
            if w in common:
                worst = max(worst, abs(h.score - common[w]))
    n = max(1, len(edited))
    return {
        "queries": len(edited),
        "top4_windows_differ_share": round(windows / n, 3),
        "top4_scores_differ_share": round(scores / n, 3),
        "top1_differs_share": round(first / n, 3),
        "max_score_diff_common_window": round(worst, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edits", type=int, default=150, help="masked samples (eval's -n)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3, help="timings per query (median kept)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compare-with", type=Path, help="another bm25.py to time against, interleaved")
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", type=Path, default=Path("bench/results/bm25_stale.json"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fimble-bm25-") as tmp:
        root = Path(tmp) / "tree"
        shutil.copytree(
            sysconfig.get_paths()["stdlib"],
            root,
            ignore=shutil.ignore_patterns("site-packages", "__pycache__"),
            symlinks=True,
        )
        files = sorted(
            str(p.relative_to(root)) for p in root.rglob("*.py") if p.is_file() and not p.is_symlink()
        )
        edited = _open(root, Path(tmp) / "home-edited")
        try:
            _edit_like_eval(edited, root, files, args.edits, rng)
            stats = edited.stats()
            queries = _queries(root, files, args.queries, rng)
            edited_hits, edited_times = _search_all(edited, queries, args.repeat)
            interleaved = (
                _interleaved(edited, queries, args.compare_with, args.repeat) if args.compare_with else None
            )
        finally:
            edited.close()
        fresh = _open(root, Path(tmp) / "home-fresh")
        try:
            fresh_hits, fresh_times = _search_all(fresh, queries, args.repeat)
            fresh_segments = fresh.stats().segments
        finally:
            fresh.close()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    run = {
        "commit": commit,
        "edits": args.edits,
        "files": len(files),
        "edited_index": {
            "stale_versions": stats.stale_versions,
            "segments": stats.segments,
            "blocks": stats.blocks,
        },
        "fresh_index_segments": fresh_segments,
        "drift": _drift(edited_hits, fresh_hits),
        "search_ms": {"edited": _percentiles(edited_times), "fresh": _percentiles(fresh_times)},
        **({"search_ms_interleaved": interleaved} if interleaved else {}),
        "load_avg": [load_before, os.getloadavg()],
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    print(json.dumps(run, indent=2))
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    results[args.label] = run
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
