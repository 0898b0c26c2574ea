"""The KV state store without a model: matching, LRU bound, atomic writes, corrupt files."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import numpy as np
import pytest

from fimble.completion.engine import kvstore
from fimble.completion.engine.kvstore import KVStore, common_prefix, state_dir


def _blob(n: int, fill: int = 7) -> bytes:
    return bytes([fill]) * n


def test_common_prefix() -> None:
    a = np.array([1, 2, 3, 4], dtype=np.int32)
    assert common_prefix(a, np.array([1, 2, 9], dtype=np.int32)) == 2
    assert common_prefix(a, a) == 4
    assert common_prefix(a, np.array([], dtype=np.int32)) == 0


def test_save_match_read_round_trip(tmp_path: Path) -> None:
    store = KVStore(tmp_path)
    store.save([1, 2, 3, 4, 5], _blob(100))
    store.save([9, 9, 9], _blob(50, 3))
    entry, n = store.match([1, 2, 3, 7, 7, 7])
    assert n == 3 and entry.n_tokens == 5
    assert store.read(entry) == _blob(100)
    assert store.match([5, 5]) is None
    # a new process sees the same entries
    again = KVStore(tmp_path)
    entry, n = again.match([9, 9, 9, 1])
    assert n == 3 and again.read(entry) == _blob(50, 3)


def test_longer_state_replaces_its_prefixes(tmp_path: Path) -> None:
    store = KVStore(tmp_path)
    store.save([1, 2, 3], _blob(10))
    store.save([1, 2, 3, 4, 5], _blob(10))
    assert [e.n_tokens for e in store.entries()] == [5]
    assert len(list(tmp_path.glob("*.kv"))) == 1
    assert store.covered([1, 2, 3, 4]) and store.covered([1, 2, 3, 4, 5, 6], slack=1)
    assert not store.covered([1, 2, 3, 4, 5, 6, 7], slack=1)


def test_lru_eviction_keeps_the_bound(tmp_path: Path) -> None:
    store = KVStore(tmp_path, max_bytes=3 * 1100)
    a = store.save([1] * 10, _blob(1000))
    b = store.save([2] * 10, _blob(1000))
    assert a is not None and b is not None
    # Recency is the files' mtime; file timestamps come from a coarse clock, so on a busy machine two
    # saves and a touch can share one tick. Put a and b clearly apart: b written long ago, a used now.
    past = time.time() - 100
    os.utime(a.path, (past - 1, past - 1))
    os.utime(b.path, (past, past))
    store.touch(a)  # a is now more recent than b
    store.save([3] * 10, _blob(1000))
    store.save([4] * 10, _blob(1000))
    firsts = sorted(int(e.tokens[0]) for e in store.entries())
    assert firsts == [1, 3, 4]
    assert store.total_bytes <= store.max_bytes
    assert sum(p.stat().st_size for p in tmp_path.glob("*.kv")) <= store.max_bytes


def test_state_larger_than_the_bound_is_not_saved(tmp_path: Path) -> None:
    store = KVStore(tmp_path, max_bytes=500)
    assert store.save([1, 2], _blob(1000)) is None
    assert store.entries() == []


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_files_are_ignored_and_deleted(tmp_path: Path, damage: str) -> None:
    store = KVStore(tmp_path)
    entry = store.save([1, 2, 3, 4], _blob(4096))
    assert entry is not None
    data = entry.path.read_bytes()
    if damage == "truncate":
        entry.path.write_bytes(data[:-100])
    elif damage == "flip":
        entry.path.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    else:
        entry.path.write_bytes(b"not a state")
    # the running store finds out on read; a new one already on its scan
    fresh = KVStore(tmp_path)
    if damage == "flip":  # header and size are intact: only the checksum can tell
        hit = fresh.match([1, 2, 3, 4])
        assert hit is not None and fresh.read(hit[0]) is None
    else:
        assert fresh.match([1, 2, 3, 4]) is None
    assert not entry.path.exists()
    assert store.read(entry) is None
    assert store.match([1, 2, 3, 4]) is None


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / "abc.tmp.1.2"
    stale.write_bytes(b"half a state")
    os.utime(stale, (1, 1))
    fresh = tmp_path / "def.tmp.1.3"  # another process is writing it right now
    fresh.write_bytes(b"being written")
    KVStore(tmp_path)
    assert not stale.exists() and fresh.exists()


def test_disk_full_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = KVStore(tmp_path)

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(kvstore.os, "fsync", full)
    assert store.save([1, 2, 3], _blob(100)) is None
    assert store.errors == 1
    assert "could not save a KV state" in caplog.text
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind, nothing half-written


def test_async_saves_reach_disk(tmp_path: Path) -> None:
    store = KVStore(tmp_path)
    store.save_async([5, 6, 7], _blob(10))
    assert store.flush(5)
    assert store.match([5, 6, 7]) is not None
    store.close()


def test_state_dir_depends_on_the_model_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FIMBLE_KV_STATE_DIR", raising=False)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    first = state_dir(model)
    assert first.is_relative_to(tmp_path / "home" / "kvstate")
    model.write_bytes(b"xy")
    assert state_dir(model) != first


def test_two_processes_sharing_the_store_keep_one_bound(tmp_path: Path) -> None:
    first, second = KVStore(tmp_path, max_bytes=3 * 1100), KVStore(tmp_path, max_bytes=3 * 1100)
    for i in range(3):
        first.save([i + 1] * 10, _blob(1000))
    second.save([9] * 10, _blob(1000))  # second never indexed first's states, but counts them
    assert sum(p.stat().st_size for p in tmp_path.glob("*.kv")) <= 3 * 1100
    hit = first.match([1] * 10)  # the oldest went; first finds out when it reads
    assert hit is None or first.read(hit[0]) is None


def test_an_edited_files_older_state_is_replaced(tmp_path: Path) -> None:
    store = KVStore(tmp_path)
    store.save([7, 7, 7, 7, 7, 7, 7, 7, 7, 7], _blob(10))  # another file
    store.save([1, 2, 3, 4, 5, 6, 7, 8], _blob(10))
    store.save([1, 2, 3, 4, 5, 9, 9, 9, 9], _blob(10), file_start=2)  # the file edited after 5 of 8
    assert sorted(e.n_tokens for e in store.entries()) == [9, 10]
    store.save([1, 2, 8, 8, 8, 8, 8, 8, 8], _blob(10), file_start=2)  # context shared, another file
    assert sorted(e.n_tokens for e in store.entries()) == [9, 9, 10]
    store.save([1, 2, 3, 4, 5, 6, 6, 6, 6], _blob(10))  # no file_start: only true prefixes go
    assert sorted(e.n_tokens for e in store.entries()) == [9, 9, 9, 10]
