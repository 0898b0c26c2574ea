"""The completion cache: memory LRU, LMDB persistence across reopen, size bounds, damaged files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fimble.completion.cache import CacheConfig, Cached, CompletionCache, request_key


def _cache(path: Path, **kw: int) -> CompletionCache:
    return CompletionCache(CacheConfig(path=path, **kw))


def test_keys_separate_their_parts() -> None:
    assert request_key("m", ["ab", "c"]) != request_key("m", ["a", "bc"])
    assert request_key("m", ["a"]) != request_key("n", ["a"])
    assert request_key("m", ["a", 1]) == request_key("m", ["a", 1])


def test_memory_lru_keeps_the_most_recently_used(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "c", memory_entries=2, disk_mb=0)
    a, b, c = (request_key("m", [x]) for x in "abc")
    cache.put(a, Cached("A", False))
    cache.put(b, Cached("B", False))
    assert cache.get(a) == (Cached("A", False), "memory")  # a is now the newest
    cache.put(c, Cached("C", True))
    assert cache.get(b) is None  # evicted, and no disk behind it
    assert cache.get(a) is not None and cache.get(c) is not None
    assert cache.stats().misses == 1 and cache.stats().disk_state == "off"


def test_entries_survive_a_reopen(tmp_path: Path) -> None:
    key = request_key("m", ["prefix", "suffix"])
    first = _cache(tmp_path / "c")
    first.put(key, Cached("return x", True))
    first.close()
    again = _cache(tmp_path / "c")
    assert again.get(key) == (Cached("return x", True), "disk")
    assert again.get(key) == (Cached("return x", True), "memory")  # promoted
    stats = again.stats()
    assert stats.disk_hits == 1 and stats.memory_hits == 1 and stats.disk_entries == 1
    again.close()


def test_disk_holds_at_most_the_configured_entries_oldest_used_first(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "c", disk_entries=10, memory_entries=1)
    keys = [request_key("m", [str(i)]) for i in range(25)]
    for i, key in enumerate(keys[:10]):
        cache.put(key, Cached(str(i), False))
    cache.flush()
    assert cache.get(keys[0]) is not None  # touched on disk: now the newest there
    cache.flush()
    for i, key in enumerate(keys[10:], 10):
        cache.put(key, Cached(str(i), False))
    cache.flush()
    stats = cache.stats()
    assert stats.disk_entries == 10 and stats.evictions == 15
    cache.close()
    reopened = _cache(tmp_path / "c", disk_entries=10, memory_entries=1)
    assert reopened.stats().disk_entries == 10
    assert reopened.get(keys[24]) is not None
    assert reopened.get(keys[1]) is None
    reopened.close()


def test_a_full_map_evicts_instead_of_failing(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "c", disk_mb=1, disk_entries=1_000_000, memory_entries=1)
    big = "x" * 3000
    for i in range(800):  # ~2.4 MB of values into a 1 MiB map
        cache.put(request_key("m", [str(i)]), Cached(big, False))
        if i % 50 == 0:
            cache.flush()
    cache.flush()
    stats = cache.stats()
    assert stats.evictions > 0
    assert stats.disk_bytes <= 1 << 20
    assert sum(f.stat().st_size for f in (tmp_path / "c").iterdir()) <= (1 << 20) + 8192
    assert cache.get(request_key("m", ["799"])) is not None
    cache.close()


def test_a_map_of_small_entries_keeps_taking_writes_once_full(tmp_path: Path) -> None:
    """Small values live in leaf pages, and deleting them copies those pages: eviction has to start
    before the map's last page, or a full map could no longer evict and would refuse every write."""
    cache = _cache(tmp_path / "c", disk_mb=1, disk_entries=1_000_000, memory_entries=1)
    keys = [request_key("m", [str(i)]) for i in range(12_000)]  # ~3 MB of entries into a 1 MiB map
    for i, key in enumerate(keys):
        cache.put(key, Cached(f"value {i} " * 12, False))
        if i % 100 == 99:
            cache.flush()
    cache.flush()
    stats = cache.stats()
    assert stats.evictions > 0 and stats.errors == 0
    cache.close()
    reopened = _cache(tmp_path / "c", disk_mb=1, disk_entries=1_000_000, memory_entries=1)
    assert all(reopened.get(key) is not None for key in keys[-500:])
    reopened.close()


def test_an_eviction_short_of_free_pages_goes_on_in_smaller_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk of deletions copies leaf pages all over the tree; a map filled further than usual
    (writes queued up on a loaded machine) may not hold the copies. The trim must not fail the cache:
    it goes on in smaller chunks."""
    import lmdb

    cache = _cache(tmp_path / "c", memory_entries=1)
    keys = [request_key("m", [str(i)]) for i in range(300)]
    for i, key in enumerate(keys):
        cache.put(key, Cached(f"value {i}", False))
    cache.flush()
    disk = cache._disk
    assert disk is not None
    real = cache._evict_in
    sizes: list[int] = []

    def short_of_pages(txn: object, d: object, n: int) -> None:
        sizes.append(n)
        if n > 64:
            raise lmdb.MapFullError("MDB_MAP_FULL")
        real(txn, d, n)

    monkeypatch.setattr(cache, "_evict_in", short_of_pages)
    cache._evict(disk, 200, chunk=512)
    assert disk.count == 100 and sizes[:3] == [200, 100, 50]
    monkeypatch.undo()
    assert cache.get(keys[0]) is None and cache.get(keys[-1]) is not None
    cache.close()


def test_a_damaged_file_is_set_aside_and_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "c"
    path.mkdir()
    (path / "data.mdb").write_bytes(b"\x00garbage" * 1000)
    with caplog.at_level(logging.WARNING):
        cache = _cache(path)
    assert cache.stats().disk_state == "open"
    assert (tmp_path / "c.broken").exists()
    key = request_key("m", ["a"])
    cache.put(key, Cached("A", False))
    cache.flush()
    cache.close()
    assert _cache(path).get(key) == (Cached("A", False), "disk")
    assert "completion cache" in caplog.text


def test_an_unusable_directory_leaves_a_memory_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = _cache(blocker / "c")
    assert cache.stats().disk_state == "failed"
    key = request_key("m", ["a"])
    cache.put(key, Cached("A", False))
    assert cache.get(key) == (Cached("A", False), "memory")
    cache.close()


def test_a_damaged_value_is_a_miss(tmp_path: Path) -> None:
    import lmdb

    key = request_key("m", ["a"])
    cache = _cache(tmp_path / "c")
    cache.put(key, Cached("A", False))
    cache.close()
    env = lmdb.open(str(tmp_path / "c"), max_dbs=2)
    with env.begin(write=True, db=env.open_db(b"entries")) as txn:
        txn.put(key, b"\x00" * 8 + b"{not json")
    env.close()
    again = _cache(tmp_path / "c", memory_entries=1)
    assert again.get(key) is None
    assert again.stats().errors == 1
    again.close()


def test_sizes_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIMBLE_COMPLETION_CACHE_MB", "8")
    monkeypatch.setenv("FIMBLE_COMPLETION_CACHE_ENTRIES", "nope")
    config = CacheConfig.from_env()
    assert config.disk_mb == 8 and config.disk_entries == CacheConfig().disk_entries


def test_two_processes_sharing_the_file_keep_one_order(tmp_path: Path) -> None:
    import subprocess
    import sys

    other = (
        "from pathlib import Path\n"
        "from fimble.completion.cache import CacheConfig, Cached, CompletionCache, request_key\n"
        f"c = CompletionCache(CacheConfig(path=Path({str(tmp_path / 'c')!r}), disk_entries=4))\n"
        "for i in range(0, 8, 2):\n"
        "    c.put(request_key('m', [str(i)]), Cached(str(i), False))\n"
        "c.flush()\n"
        "c.close()\n"
    )
    a = _cache(tmp_path / "c", disk_entries=4, memory_entries=1)
    for i in range(1, 8, 2):
        a.put(request_key("m", [str(i)]), Cached(str(i), False))
    a.flush()
    subprocess.run([sys.executable, "-c", other], check=True)
    a.put(request_key("m", ["8"]), Cached("8", False))
    a.flush()
    assert a.stats().disk_entries == 4
    assert a.get(request_key("m", ["8"])) is not None and a.get(request_key("m", ["6"])) is not None
    assert a.get(request_key("m", ["1"])) is None
    a.close()


def test_the_code_that_answers_is_part_of_every_key(tmp_path: Path) -> None:
    """An upgrade that changes a stop rule or the prompt must not serve the older code's answers
    from disk: the keys carry a digest of that code, which any change to it changes."""
    from fimble.completion import cache as cache_module
    from fimble.completion.cache import _ANSWER_CODE, answer_code_id, code_digest

    (tmp_path / "output").mkdir()
    rule = tmp_path / "output" / "stops.py"
    rule.write_text("CUT = ')'\n")
    (tmp_path / "service.py").write_text("")
    before = code_digest(tmp_path, ("output", "service.py", "gone"))
    rule.write_text("CUT = ''\n")
    assert code_digest(tmp_path, ("output", "service.py", "gone")) != before
    assert answer_code_id() == code_digest(Path(cache_module.__file__).parent, _ANSWER_CODE)
    assert {"prompt", "context", "engine", "output"} <= set(_ANSWER_CODE)
