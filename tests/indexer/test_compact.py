"""Segment compaction: tiny segments merge, stale versions go, an interrupted merge resumes."""

from __future__ import annotations

from pathlib import Path

from fimble.indexer import WorkspaceIndex
from fimble.indexer.compact import TINY_COUNT, compact, plan


def _save(ix: WorkspaceIndex, rel: str, text: str) -> None:
    assert ix.update_buffer(rel, text)
    assert ix.flush(10, maintenance=True)


def test_tiny_segments_are_merged(index: WorkspaceIndex) -> None:
    before = index.stats().segments
    for i in range(TINY_COUNT + 1):
        _save(index, f"notes/n{i}.py", f"def note_{i}(): return 'zqnote{i}'\n")
    stats = index.stats()
    assert stats.segments < before + TINY_COUNT
    for i in range(TINY_COUNT + 1):
        assert [s.path for s in index.search(f"zqnote{i}")] == [f"notes/n{i}.py"]


def test_stale_versions_are_dropped(index: WorkspaceIndex) -> None:
    for i in range(70):
        _save(index, "pyproj/churn.py", f"def churn(): return 'zqversion{i}'\n")
    stats = index.stats()
    assert stats.stale_versions <= 10  # a full merge ran once dead versions piled up
    assert stats.segments <= TINY_COUNT
    assert [s.path for s in index.search("zqversion69")] == ["pyproj/churn.py"]
    assert index.search("zqversion3") == ()
    (churn,) = index.definitions("churn")
    assert churn.path == "pyproj/churn.py"


def test_interrupted_merge_resumes(index: WorkspaceIndex, workspace: Path) -> None:
    index.pause()  # keep the writer thread from compacting on its own
    store = index._store
    from fimble.indexer.worker import WorkerConfig, analyze_bytes
    from fimble.indexer.writer import apply_batch

    cfg = WorkerConfig(1 << 20, 12, 2048)
    n = TINY_COUNT + 1
    for i in range(n):
        apply_batch(store, [analyze_bytes(f"extra/e{i}.py", f"zqextra{i} = {i}\n".encode(), 10, 0, cfg)])
    job = plan(store)
    assert job is not None and len(job.sources) >= TINY_COUNT
    calls = iter([False, True])  # let one chunk through, then interrupt
    assert not compact(store, interrupt=lambda: next(calls, True))
    resumed = plan(store)
    assert resumed is not None and resumed.target == job.target and resumed.next_bucket > 0
    for i in range(n):  # consistent while half merged
        assert [s.path for s in index.search(f"zqextra{i}")] == [f"extra/e{i}.py"]
    assert compact(store)
    assert plan(store) is None or plan(store).target != job.target
    for i in range(n):
        assert [s.path for s in index.search(f"zqextra{i}")] == [f"extra/e{i}.py"]
    index.resume()
