"""The LMDB store: location, schema, map growth, full disks, stale readers, the writer lock."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import lmdb
import pytest

from fimble.errors import DiskFull, IndexLocked, IndexNotReady
from fimble.indexer import IndexConfig, WorkspaceIndex
from fimble.indexer.records import SCHEMA
from fimble.indexer.store import open_store, store_dir
from fimble.paths import index_root
from tests.indexer.conftest import write

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, home: Path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "FIMBLE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _wait_line(proc: subprocess.Popen, expected: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if expected in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"child exited: {proc.stderr.read()}")
    raise AssertionError(f"no {expected!r} from child")


def _bulky(root: Path, files: int, lines: int = 400) -> None:
    for i in range(files):
        body = "".join(f"def func_{i}_{j}(value_{j}):\n    return value_{j} * {j}\n" for j in range(lines))
        write(root, f"pkg/mod_{i}.py", body)


def test_store_dir_is_per_workspace(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    assert store_dir(index_root(), a) != store_dir(index_root(), b)
    assert store_dir(index_root(), a) == store_dir(index_root(), a / ".." / "a")
    assert store_dir(index_root(), a).name.startswith("a-")


def test_schema_mismatch_rebuilds(workspace: Path, config: IndexConfig) -> None:
    with WorkspaceIndex.open(workspace, config) as ix:
        ix.build()
        store = ix._store
        store.write(lambda txn: txn.put(b"schema", b"fimble-index/0 old", db=store.db["meta"]))
    with pytest.raises(IndexNotReady, match="another fimble version"):
        WorkspaceIndex.open(workspace, config, writable=False)
    with WorkspaceIndex.open(workspace, config) as ix:
        assert ix._store.schema() == SCHEMA
        assert ix.stats().files == 0 and not ix.stats().ready  # emptied, to be rebuilt
        ix.build()
        assert ix.definitions("User")


def test_map_grows_when_full(tmp_path: Path) -> None:
    root = tmp_path / "big"
    _bulky(root, files=30)
    config = IndexConfig(workers=0, map_bytes=1 << 20, max_map_bytes=1 << 30)
    with WorkspaceIndex.open(root, config) as ix:
        ix.build()
        stats = ix.stats()
        assert stats.map_bytes > 1 << 20 and stats.store_bytes > 1 << 20
        assert len(ix.definitions("func_29_399")) == 1


def test_disk_full_at_the_size_limit_keeps_what_was_stored(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "small.py", "def survivor():\n    return 1\n")
    config = IndexConfig(workers=0, map_bytes=1 << 20, max_map_bytes=1 << 20)
    with WorkspaceIndex.open(root, config) as ix:
        ix.build()
        _bulky(root, files=30)
        with pytest.raises(DiskFull, match="size limit"):
            ix.build()
        assert [d.path for d in ix.definitions("survivor")] == ["small.py"]
        assert isinstance(ix.last_error, DiskFull)
    with WorkspaceIndex.open(root, config, writable=False) as ix:
        assert [d.path for d in ix.definitions("survivor")] == ["small.py"]


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_real_write_failure_is_disk_full(tmp_path: Path, fimble_home: Path) -> None:
    """A file-size limit makes the kernel refuse LMDB's writes, as a full disk would."""
    root = tmp_path / "ws"
    write(root, "small.py", "def survivor():\n    return 1\n")
    with WorkspaceIndex.open(root, IndexConfig(workers=0)) as ix:
        ix.build()
    _bulky(root, files=40)
    proc = _python(
        f"""
        import resource, signal, sys
        from fimble.errors import DiskFull
        from fimble.indexer import IndexConfig, WorkspaceIndex
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        ix = WorkspaceIndex.open({str(root)!r}, IndexConfig(workers=0))
        size = (ix._store.path / "data.mdb").stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 65536, resource.RLIM_INFINITY))
        try:
            ix.build()
        except DiskFull as err:
            print("DISKFULL", err)
            sys.exit(0)
        print("NO ERROR")
        """,
        fimble_home,
    )
    out, err = proc.communicate(timeout=120)
    assert "DISKFULL" in out, out + err
    assert "free some disk space" in out
    with WorkspaceIndex.open(root, IndexConfig(workers=0)) as ix:
        assert [d.path for d in ix.definitions("survivor")] == ["small.py"]
        ix.build()  # with room again, the next run finishes the job
        assert ix.definitions("func_39_0")


def test_stale_reader_of_a_killed_process_is_cleared(
    workspace: Path, config: IndexConfig, fimble_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with WorkspaceIndex.open(workspace, config) as ix:
        ix.build()
        path = ix._store.path
    # LMDB resets its reader table when the first process opens the environment, so a stale slot
    # only survives (and needs reader_check) while some other process keeps the store open.
    holder = _python(
        f"""
        import lmdb, time
        env = lmdb.open({str(path)!r}, max_dbs=32)
        print("OPEN", flush=True)
        time.sleep(60)
        """,
        fimble_home,
    )
    proc = _python(
        f"""
        import lmdb, time
        env = lmdb.open({str(path)!r}, max_dbs=32)
        txn = env.begin()
        print("READING", flush=True)
        time.sleep(60)
        """,
        fimble_home,
    )
    try:
        _wait_line(holder, "OPEN")
        _wait_line(proc, "READING")
        proc.kill()
        proc.wait()
        with caplog.at_level(logging.INFO, logger="fimble.indexer.store"):
            store = open_store(path, str(workspace), map_bytes=1 << 20, max_map_bytes=1 << 30)
            store.close()
    finally:
        for child in (proc, holder):
            child.kill()
            child.wait()
    assert any("stale reader" in r.message for r in caplog.records)


def test_writer_lock_names_the_other_process(workspace: Path, config: IndexConfig, fimble_home: Path) -> None:
    proc = _python(
        f"""
        import time
        from fimble.indexer import IndexConfig, WorkspaceIndex
        ix = WorkspaceIndex.open({str(workspace)!r}, IndexConfig(workers=0))
        ix.build()
        print("LOCKED", flush=True)
        time.sleep(60)
        """,
        fimble_home,
    )
    try:
        _wait_line(proc, "LOCKED")
        with pytest.raises(IndexLocked, match=f"pid {proc.pid}"):
            WorkspaceIndex.open(workspace, config)
        with WorkspaceIndex.open(workspace, config, writable=False) as reader:  # reading still works
            assert reader.definitions("User")
    finally:
        proc.kill()
        proc.wait()
    with WorkspaceIndex.open(workspace, config) as ix:  # the lock died with its holder (SIGKILL)
        assert ix.definitions("User")


def test_lmdb_environment_is_shared_in_process(workspace: Path, config: IndexConfig) -> None:
    with WorkspaceIndex.open(workspace, config) as writer:
        writer.build()
        with WorkspaceIndex.open(workspace, config, writable=False) as reader:
            assert reader._store is writer._store
    with pytest.raises(lmdb.Error):  # what the registry protects against
        env = lmdb.open(str(store_dir(index_root(), workspace)), max_dbs=32)
        try:
            lmdb.open(str(store_dir(index_root(), workspace)), max_dbs=32)
        finally:
            env.close()
