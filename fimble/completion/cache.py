"""Finished suggestions, remembered in memory and on disk, so a repeated request costs no model time.

A suggestion is a pure function of what the prompt is built from (model, file path, text before and
after the cursor, cross-file context, token budgets, single/multi-line mode): the engine decodes
greedily. So the same request again — after an undo, after switching back to a file, or after a
restart — is answered from here. Keys hash those parts (``request_key``) and the code that turns them
into a suggestion (``answer_code_id``): an upgrade that changes the prompt's layout or a stop rule must
not go on serving what the older code answered from disk. Values are the cleaned text and its shape.

Two levels: an LRU in memory (a dict lookup on the event loop) and one LMDB environment under the
cache root, bounded both by entry count (oldest-used evicted first) and by map size (LMDB cannot grow
past it). Eviction for size starts at ``_FULL_AT`` of the map, not at its end: deleting from LMDB
copies pages too, so a map with no page left cannot even evict, and would refuse every write after.
Disk writes run on a small writer thread, off the keystroke path. The disk cache is a convenience:
a corrupt or unwritable file is logged, set aside and rebuilt (or the cache runs in memory only);
nothing here raises on the keystroke path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import shutil
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["CacheConfig", "CacheStats", "Cached", "CompletionCache", "answer_code_id", "request_key"]

log = logging.getLogger(__name__)

_ENV_MB = "FIMBLE_COMPLETION_CACHE_MB"
_ENV_ENTRIES = "FIMBLE_COMPLETION_CACHE_ENTRIES"
_SEQ = struct.Struct(">Q")  # big-endian so LMDB's byte order is age order
_FULL_AT = 0.8  # share of the map's pages in use that starts an eviction of the oldest quarter


@dataclass(frozen=True)
class CacheConfig:
    """How much to remember. ``disk_mb = 0`` keeps the cache in memory only."""

    memory_entries: int = 1024
    disk_entries: int = 20_000
    disk_mb: int = 64  # LMDB map size: the file never grows past it
    path: Path | None = None  # default: <cache root>/completions

    @classmethod
    def from_env(cls) -> CacheConfig:
        """Sizes from ``FIMBLE_COMPLETION_CACHE_MB`` / ``_ENTRIES``; a bad value is logged and ignored."""
        values: dict[str, int] = {}
        for name, attr in ((_ENV_MB, "disk_mb"), (_ENV_ENTRIES, "disk_entries")):
            raw = os.environ.get(name)
            if raw is None:
                continue
            try:
                values[attr] = max(0, int(raw))
            except ValueError:
                log.warning("%s=%r is not a whole number; using the default", name, raw)
        return cls(**values)

    def resolved_path(self) -> Path:
        if self.path is not None:
            return self.path
        from fimble.paths import cache_root

        return cache_root() / "completions"


@dataclass(frozen=True)
class Cached:
    text: str
    multiline: bool


@dataclass
class CacheStats:
    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    writes: int = 0
    evictions: int = 0
    errors: int = 0
    disk_entries: int = 0
    disk_bytes: int = 0
    disk_state: str = "off"  # off | open | failed


# What builds a suggestion from a request: prompts, context, decoding, stop rules and cleaning.
_ANSWER_CODE = ("prompt", "context", "engine", "output", "service.py")


@cache
def answer_code_id() -> str:
    """A digest of the source that turns a request into a suggestion, for the cache's keys.

    Read once per process. A digest rather than a version number: no one has to remember to bump it,
    and a development checkout gets a fresh cache with every change to that code.
    """
    return code_digest(Path(__file__).parent, _ANSWER_CODE)


def code_digest(root: Path, names: Iterable[str]) -> str:
    """A digest of the ``.py`` files of ``names`` (folders or files) under ``root``, paths included."""
    h = hashlib.blake2b(digest_size=8)
    for name in names:
        top = root / name
        for path in sorted(top.rglob("*.py")) if top.is_dir() else [top]:
            try:
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
            except OSError:  # an odd install: the model and the inputs still key the answer
                continue
    return h.hexdigest()


def request_key(model_id: str, parts: Iterable[object]) -> bytes:
    """A 16-byte digest of everything a suggestion depends on (length-prefixed, so parts never blur)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(model_id.encode("utf-8", "surrogatepass"))
    for part in parts:
        data = (part if isinstance(part, str) else repr(part)).encode("utf-8", "surrogatepass")
        h.update(_SEQ.pack(len(data)))
        h.update(data)
    return h.digest()


@dataclass
class _Disk:
    env: Any
    entries: Any  # key -> seq + payload
    order: Any  # seq -> key (oldest first)
    seq: int = 0
    count: int = 0
    pending: queue.Queue[tuple[str, bytes, bytes] | None] = field(default_factory=queue.Queue)


class CompletionCache:
    """Memory LRU over a bounded LMDB store; thread-safe."""

    def __init__(self, config: CacheConfig | None = None) -> None:
        self.config = config or CacheConfig()
        self._memory: OrderedDict[bytes, Cached] = OrderedDict()
        self._lock = threading.Lock()
        self._stats = CacheStats()
        self._disk: _Disk | None = None
        self._writer: threading.Thread | None = None
        if self.config.disk_mb > 0 and self.config.disk_entries > 0:
            self._disk = self._open_disk()
            if self._disk is not None:
                self._writer = threading.Thread(target=self._write_loop, name="fimble-cache", daemon=True)
                self._writer.start()

    # -- public -----------------------------------------------------------------------------------

    def get(self, key: bytes) -> tuple[Cached, str] | None:
        """The cached suggestion and where it was found (``memory`` | ``disk``), or None."""
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                self._memory.move_to_end(key)
                self._stats.memory_hits += 1
                return hit, "memory"
        found = self._disk_get(key)
        with self._lock:
            if found is None:
                self._stats.misses += 1
                return None
            self._stats.disk_hits += 1
            self._remember(key, found)
        self._enqueue("touch", key, b"")
        return found, "disk"

    def put(self, key: bytes, value: Cached) -> None:
        with self._lock:
            self._remember(key, value)
        payload = json.dumps({"t": value.text, "m": value.multiline}).encode("utf-8", "surrogatepass")
        self._enqueue("put", key, payload)

    def stats(self) -> CacheStats:
        with self._lock:
            out = CacheStats(**vars(self._stats))
        disk = self._disk
        if disk is not None:
            out.disk_entries = disk.count
            try:
                info, stat = disk.env.info(), disk.env.stat()
                out.disk_bytes = (info["last_pgno"] + 1) * stat["psize"]
            except Exception:  # closed or failed: the counters still tell the story
                pass
        return out

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until queued disk writes are done (tests, shutdown)."""
        if self._disk is not None and self._writer is not None and self._writer.is_alive():
            done = threading.Event()
            self._disk.pending.put(("flush", b"", done))  # type: ignore[arg-type]
            done.wait(timeout)

    def close(self) -> None:
        disk, self._disk = self._disk, None
        if disk is None:
            return
        disk.pending.put(None)
        if self._writer is not None:
            self._writer.join(5.0)
        try:
            disk.env.close()
        except Exception as err:  # pragma: no cover - closing a failed env
            log.debug("closing the completion cache: %s", err)

    # -- memory -----------------------------------------------------------------------------------

    def _remember(self, key: bytes, value: Cached) -> None:
        self._memory[key] = value
        self._memory.move_to_end(key)
        while len(self._memory) > max(1, self.config.memory_entries):
            self._memory.popitem(last=False)

    # -- disk -------------------------------------------------------------------------------------

    def _open_disk(self) -> _Disk | None:
        path = self.config.resolved_path()
        for attempt in range(2):
            try:
                return self._try_open(path)
            except Exception as err:
                self._failed(f"cannot open the completion cache {path}: {err}")
                if attempt == 0 and path.exists():
                    self._set_aside(path)
        self._stats.disk_state = "failed"
        log.warning("the completion cache stays in memory only (%s could not be opened)", path)
        return None

    def _try_open(self, path: Path) -> _Disk:
        import lmdb

        path.mkdir(parents=True, exist_ok=True)
        env = lmdb.open(
            str(path),
            map_size=self.config.disk_mb << 20,
            max_dbs=2,
            metasync=False,  # a crash may lose the last writes of a cache, never its integrity
            readahead=False,
            lock=True,
        )
        entries = env.open_db(b"entries")
        order = env.open_db(b"order")
        with env.begin(db=order) as txn:
            cur = txn.cursor()
            seq = _SEQ.unpack(cur.key())[0] if cur.last() else 0
            count = txn.stat(entries)["entries"]
            if count:  # read one entry back: a damaged file fails here, not on a keystroke
                first = txn.cursor(db=entries)
                if first.first():
                    bytes(first.value())
        self._stats.disk_state = "open"
        return _Disk(env, entries, order, seq=seq, count=count)

    def _set_aside(self, path: Path) -> None:
        """Move a damaged cache out of the way (kept for a bug report, replaced on the next failure)."""
        broken = path.with_name(path.name + ".broken")
        try:
            shutil.rmtree(broken, ignore_errors=True)
            path.rename(broken)
            log.warning("moved the damaged completion cache to %s; starting an empty one", broken)
        except OSError as err:
            log.warning("cannot move the damaged completion cache %s aside: %s", path, err)

    def _failed(self, message: str) -> None:
        with self._lock:
            self._stats.errors += 1
        log.warning("%s", message)

    def _disk_get(self, key: bytes) -> Cached | None:
        disk = self._disk
        if disk is None:
            return None
        try:
            with disk.env.begin(db=disk.entries) as txn:
                raw = txn.get(key)
            return None if raw is None else _decode(raw[_SEQ.size :])
        except Exception as err:
            self._failed(f"completion cache read failed (treated as a miss): {err}")
            return None

    def _enqueue(self, op: str, key: bytes, payload: bytes) -> None:
        if self._disk is not None:
            self._disk.pending.put((op, key, payload))

    def _write_loop(self) -> None:
        disk = self._disk
        assert disk is not None
        while True:
            item = disk.pending.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < 256:  # one transaction for whatever queued up meanwhile
                try:
                    nxt = disk.pending.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._write(disk, batch)
                    return
                batch.append(nxt)
            self._write(disk, batch)

    def _write(self, disk: _Disk, batch: list[tuple[str, bytes, Any]]) -> None:
        flushes = [p for op, _k, p in batch if op == "flush"]
        work = [(op, k, p) for op, k, p in batch if op != "flush"]
        try:
            if work:
                self._write_batch(disk, work)
        except Exception as err:
            import lmdb

            if isinstance(err, lmdb.MapFullError):
                # The map is full all the same (a burst of large entries): drop the older half in
                # small steps, which need few free pages, and try once more.
                try:
                    self._evict(disk, max(1, disk.count // 2), chunk=64)
                    self._write_batch(disk, work)
                except Exception as again:
                    self._failed(f"completion cache write failed after eviction: {again}")
            else:
                self._failed(f"completion cache write failed (suggestions still work): {err}")
        if work:
            try:
                self._trim(disk)
            except Exception as err:
                self._failed(f"completion cache eviction failed (suggestions still work): {err}")
        for done in flushes:
            done.set()

    def _write_batch(self, disk: _Disk, work: list[tuple[str, bytes, bytes]]) -> None:
        with disk.env.begin(write=True) as txn:
            # Another server process may share the file: take sequence and count from it, not memory.
            last = txn.cursor(db=disk.order)
            disk.seq = _SEQ.unpack(last.key())[0] if last.last() else 0
            disk.count = txn.stat(disk.entries)["entries"]
            for op, key, payload in work:
                old = txn.get(key, db=disk.entries)
                if op == "touch":
                    if old is None:
                        continue
                    payload = old[_SEQ.size :]
                if old is not None:
                    txn.delete(old[: _SEQ.size], db=disk.order)
                else:
                    disk.count += 1
                disk.seq += 1
                seq = _SEQ.pack(disk.seq)
                txn.put(key, seq + payload, db=disk.entries)
                txn.put(seq, key, db=disk.order)
                if op == "put":
                    with self._lock:
                        self._stats.writes += 1
            over = disk.count - self.config.disk_entries
            if over > 0:
                self._evict_in(txn, disk, over)

    def _trim(self, disk: _Disk) -> None:
        """Evict the oldest quarter once the B-trees hold ``_FULL_AT`` of the map's pages.

        In chunks, one transaction each: a deletion copies the pages it touches, so one large
        eviction needs about as many free pages as it frees, and the last free pages of a full map
        are too few for it. Pages freed by one chunk's transaction are reused by the next."""
        with disk.env.begin() as txn:
            in_use = sum(
                st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
                for st in (txn.stat(disk.entries), txn.stat(disk.order), disk.env.stat())
            )
        pages = (self.config.disk_mb << 20) // int(disk.env.stat()["psize"])
        if in_use > _FULL_AT * pages:
            self._evict(disk, max(1, disk.count // 4))

    def _evict(self, disk: _Disk, n: int, chunk: int = 512) -> None:
        """Evict the ``n`` oldest entries, ``chunk`` per transaction. The entries' keys are hashes,
        so a chunk's deletions touch leaf pages all over the tree and each is copied: a chunk that
        finds too few free pages for that (a map filled further than usual before its trim, as when
        writes queue up on a loaded machine) is retried in halves rather than failing the cache."""
        import lmdb

        while n > 0 and disk.count > 0:
            step = min(n, chunk)
            try:
                with disk.env.begin(write=True) as txn:
                    self._evict_in(txn, disk, step)
            except lmdb.MapFullError:
                if step == 1:
                    raise
                chunk = max(1, step // 2)
                with disk.env.begin() as txn:  # the aborted chunk removed nothing
                    disk.count = txn.stat(disk.entries)["entries"]
                continue
            n -= step

    def _evict_in(self, txn: Any, disk: _Disk, n: int) -> None:
        cur = txn.cursor(db=disk.order)
        removed = 0
        if cur.first():
            while removed < n:
                key = cur.value()
                txn.delete(key, db=disk.entries)
                removed += 1
                if not cur.delete():  # moves to the next entry
                    break
                if not cur.key():
                    break
        disk.count -= removed
        with self._lock:
            self._stats.evictions += removed


def _decode(payload: bytes) -> Cached:
    data = json.loads(payload.decode("utf-8", "surrogatepass"))
    return Cached(text=str(data["t"]), multiline=bool(data["m"]))
