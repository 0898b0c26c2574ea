"""Per-file analysis in the pool: reading a file, and a worker's watch on the indexing process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fimble.indexer.worker import FileDoc, Skip, Task, WorkerConfig, _alive, analyze_path

CONFIG = WorkerConfig(max_file_bytes=1000, stride=12, block_bytes=2048)


def test_a_file_is_read_whole_and_too_large_ones_are_skipped(tmp_path: Path) -> None:
    small = tmp_path / "a.py"
    small.write_text("def f():\n    return 1\n" * 20)
    doc = analyze_path(Task("a.py", str(small), None), CONFIG)
    assert isinstance(doc, FileDoc) and doc.data == small.read_bytes() and doc.size == len(doc.data)
    big = tmp_path / "b.py"
    big.write_bytes(b"x = 1\n" * 200)
    assert analyze_path(Task("b.py", str(big), None), CONFIG) == Skip(
        "b.py", "too large", 1200, big.stat().st_mtime_ns
    )
    empty = tmp_path / "c.py"
    empty.write_bytes(b"")
    assert isinstance(analyze_path(Task("c.py", str(empty), None), CONFIG), FileDoc)


def test_alive_sees_the_parent_a_live_process_and_not_the_dead() -> None:
    """Forked by the forkserver, a worker watches the indexing process by pid, not as its parent:
    a process that exited, reaped or still a zombie, counts as gone."""
    assert _alive(os.getppid()) and _alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while _alive(child.pid) and time.monotonic() < deadline:  # a zombie until waited for
        time.sleep(0.02)
    assert not _alive(child.pid)
    child.wait()
    assert not _alive(child.pid)
