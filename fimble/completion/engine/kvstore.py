"""Saved KV states on disk: a file's prompt, evaluated once, read back instead of recomputed.

Evaluating a 2,000-token prompt takes ~20 s on a 2-core CPU; reading its KV state back (~28 KiB a
token on the 1.5B model, ~56 MiB) takes tens of milliseconds. So the engine's evaluated prompt heads
are kept here, keyed by a hash of their tokens, and the token list is stored alongside: a new prompt
is matched against every entry by longest common token prefix, and the best one is loaded before the
usual prefix/chunk reuse evaluates the rest. Switching back to a file, or restarting the server, then
costs a file read rather than a re-evaluation.

The store is a directory of ``<key>.kv`` files bounded in total size, least recently used first out.
A file is written to a temporary name and renamed into place, so a reader never sees half of one; a
file that is truncated or fails its checksum (a crash, a full disk, another version) is deleted and
ignored. Nothing here raises on I/O trouble: a state that cannot be saved is merely recomputed later.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import queue
import struct
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fimble.paths import cache_root

__all__ = ["DEFAULT_MAX_BYTES", "KVEntry", "KVStore", "common_prefix", "state_dir"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 1 << 30
Blob = bytes | bytearray | memoryview

_MAGIC = b"FIMBLEKV"
_VERSION = 1
_HEADER = struct.Struct("<8sIIQI")  # magic, version, n_tokens, blob bytes, crc32(tokens + blob)
_SUFFIX = ".kv"
_STALE_TMP_S = 600.0  # a temporary file this old belongs to a writer that died


@dataclass(frozen=True)
class KVEntry:
    """One saved state: the tokens whose KV it holds (positions 0..n-1) and where it lives."""

    key: str
    path: Path
    tokens: np.ndarray  # int32, read-only
    size: int  # bytes on disk

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


def state_dir(model_path: str | Path) -> Path:
    """The store directory for one model file: a state is only valid for the weights that made it.

    Under ``FIMBLE_HOME``'s ``kvstate/``, or ``FIMBLE_KV_STATE_DIR`` (tests keep theirs apart)."""
    p = Path(model_path)
    try:
        st = p.stat()
        ident = f"{p.name}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        ident = str(p)
    digest = hashlib.blake2b(ident.encode(), digest_size=8).hexdigest()
    root = os.environ.get("FIMBLE_KV_STATE_DIR")
    return (Path(root) if root else cache_root() / "kvstate") / f"{p.stem}-{digest}"


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two int32 arrays (vectorized: called per request)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def _as_array(tokens: Sequence[int] | np.ndarray) -> np.ndarray:
    arr = np.asarray(tokens, dtype=np.int32)
    arr.setflags(write=False)
    return arr


def _superseded(entry: KVEntry, shared: int, file_start: int | None) -> bool:
    if shared >= entry.n_tokens:
        return True
    return file_start is not None and shared > file_start and shared * 2 >= entry.n_tokens


def _key(tokens: np.ndarray) -> str:
    return hashlib.blake2b(tokens.astype("<i4").tobytes(), digest_size=16).hexdigest()


class KVStore:
    """A size-bounded LRU directory of saved KV states; safe to use from two threads.

    Writes can be handed to a background thread (``save_async``) so that the engine thread only pays
    for copying the state out of llama.cpp, not for the disk.
    """

    def __init__(self, root: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: dict[str, KVEntry] = {}
        self._used: dict[str, float] = {}  # key -> last use (file mtime), for LRU
        self._queue: queue.Queue[tuple[np.ndarray, Blob, int | None] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self.errors = 0  # writes that failed (disk full, permissions), for status
        self._scan()

    # -- reading ---------------------------------------------------------------------------------

    def _scan(self) -> None:
        """Index the directory: headers and token lists only; broken files are deleted."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            names = os.listdir(self.root)
        except OSError as err:
            log.warning("KV state directory %s is not usable (%s); states will not be kept", self.root, err)
            return
        now = time.time()
        for name in names:
            path = self.root / name
            if ".tmp" in name:
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > _STALE_TMP_S:
                        path.unlink()
                continue
            if not name.endswith(_SUFFIX):
                continue
            entry = self._read_index(path)
            if entry is None:
                self._discard(path, "unreadable")
                continue
            with contextlib.suppress(OSError):
                self._used[entry.key] = path.stat().st_mtime
            self._entries[entry.key] = entry

    @staticmethod
    def _read_index(path: Path) -> KVEntry | None:
        try:
            size = path.stat().st_size
            with open(path, "rb") as f:
                head = f.read(_HEADER.size)
                if len(head) != _HEADER.size:
                    return None
                magic, version, n, blob_len, _crc = _HEADER.unpack(head)
                if magic != _MAGIC or version != _VERSION or size != _HEADER.size + 4 * n + blob_len:
                    return None
                tokens = np.frombuffer(f.read(4 * n), dtype="<i4").astype(np.int32)
        except (OSError, ValueError):
            return None
        if len(tokens) != n or n == 0:
            return None
        return KVEntry(path.name[: -len(_SUFFIX)], path, _as_array(tokens), size)

    def _discard(self, path: Path, why: str) -> None:
        log.info("dropping KV state %s (%s)", path.name, why)
        with contextlib.suppress(OSError):
            path.unlink()

    def entries(self) -> list[KVEntry]:
        with self._lock:
            return list(self._entries.values())

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(e.size for e in self._entries.values())

    def match(self, prompt: Sequence[int] | np.ndarray) -> tuple[KVEntry, int] | None:
        """The entry sharing the longest token prefix with ``prompt``, and that length (None: none)."""
        arr = np.asarray(prompt, dtype=np.int32)
        best: tuple[KVEntry, int] | None = None
        for entry in self.entries():
            n = common_prefix(entry.tokens, arr)
            if n and (best is None or n > best[1] or (n == best[1] and entry.n_tokens < best[0].n_tokens)):
                best = (entry, n)
        return best

    def read(self, entry: KVEntry) -> memoryview | None:
        """The state's bytes, verified; a missing, truncated or corrupt file is forgotten (None)."""
        try:
            with open(entry.path, "rb") as f:
                data = bytearray(os.fstat(f.fileno()).st_size)  # writable: llama.cpp reads it in place
                got = f.readinto(data)
            del data[got:]
        except OSError:
            self._forget(entry.key)
            return None
        ok = len(data) >= _HEADER.size
        if ok:
            magic, version, n, blob_len, crc = _HEADER.unpack_from(data)
            start = _HEADER.size + 4 * n
            ok = (
                magic == _MAGIC
                and version == _VERSION
                and n == entry.n_tokens
                and len(data) == start + blob_len
                and zlib.crc32(memoryview(data)[_HEADER.size :]) == crc
            )
        if not ok:
            self._forget(entry.key)
            self._discard(entry.path, "truncated or corrupt")
            return None
        self.touch(entry)
        return memoryview(data)[start:]

    def touch(self, entry: KVEntry) -> None:
        """Mark ``entry`` used now (LRU order survives restarts through the file's mtime)."""
        now = time.time()
        with self._lock:
            if entry.key in self._entries:
                self._used[entry.key] = now
        with contextlib.suppress(OSError):
            os.utime(entry.path, (now, now))

    def forget(self, entry: KVEntry, why: str = "rejected") -> None:
        """Delete an entry the engine could not use (a state from another llama.cpp build)."""
        self._forget(entry.key)
        self._discard(entry.path, why)

    def _forget(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)
            self._used.pop(key, None)

    # -- writing ---------------------------------------------------------------------------------

    def covered(self, tokens: Sequence[int] | np.ndarray, slack: int = 0) -> bool:
        """Whether some entry already holds all of ``tokens`` but at most ``slack`` of the last ones."""
        arr = np.asarray(tokens, dtype=np.int32)
        hit = self.match(arr)
        return hit is not None and hit[1] >= len(arr) - slack

    def save(
        self, tokens: Sequence[int] | np.ndarray, blob: Blob, file_start: int | None = None
    ) -> KVEntry | None:
        """Write a state now (atomically), then evict to the size bound. Never raises on I/O errors.

        Entries that are a prefix of the new one are removed. So are, given ``file_start`` (where
        the file's own text begins, after repository context and path), entries sharing more than
        that and at least half their tokens: the same file before an edit or with the cursor further
        up, which the new one serves as well; keeping them would fill the store with near-copies.
        """
        arr = _as_array(tokens)
        if len(arr) == 0 or not blob:
            return None
        tok_bytes = arr.astype("<i4").tobytes()
        size = _HEADER.size + len(tok_bytes) + len(blob)
        if size > self.max_bytes:
            log.info(
                "KV state of %d tokens (%d MiB) exceeds the store's bound; not saved", len(arr), size >> 20
            )
            return None
        key = _key(arr)
        path = self.root / f"{key}{_SUFFIX}"
        tmp = self.root / f"{key}.tmp.{os.getpid()}.{threading.get_ident()}"
        crc = zlib.crc32(blob, zlib.crc32(tok_bytes))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(_HEADER.pack(_MAGIC, _VERSION, len(arr), len(blob), crc))
                f.write(tok_bytes)
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as err:
            self.errors += 1
            log.warning(
                "could not save a KV state to %s (%s); free disk space or lower kvStateMiB", self.root, err
            )
            with contextlib.suppress(OSError):
                tmp.unlink()
            return None
        entry = KVEntry(key, path, arr, size)
        with self._lock:
            self._entries[key] = entry
            self._used[key] = time.time()
            superseded = [
                e
                for e in self._entries.values()
                if e.key != key and _superseded(e, common_prefix(e.tokens, arr), file_start)
            ]
        for old in superseded:
            self.forget(old, "superseded by a newer state of the same text")
        self._evict()
        return entry

    def _evict(self) -> None:
        """Delete the least recently used states until the directory fits the bound.

        Counted from the directory, not this process's index, so that two servers sharing the store
        (an editor's and the HTTP one) keep it within one bound; recency is the files' mtime, which
        ``touch`` sets on every read.
        """
        files: list[tuple[float, int, Path]] = []
        try:
            with os.scandir(self.root) as it:
                for d in it:
                    if d.name.endswith(_SUFFIX):
                        with contextlib.suppress(OSError):
                            st = d.stat()
                            files.append((st.st_mtime, st.st_size, Path(d.path)))
        except OSError:
            return
        total = sum(size for _, size, _ in files)
        files.sort()
        while total > self.max_bytes and files:
            _, size, path = files.pop(0)
            total -= size
            self._forget(path.name[: -len(_SUFFIX)])
            self._discard(path, "least recently used")

    def save_async(
        self, tokens: Sequence[int] | np.ndarray, blob: Blob, file_start: int | None = None
    ) -> None:
        """Queue a ``save`` for the writer thread; the caller's thread only pays for the copy it made."""
        with self._lock:
            self._pending += 1
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="fimble-kvstore", daemon=True)
                self._writer.start()
        self._queue.put((_as_array(tokens), blob, file_start))

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self.save(*item)
            except Exception:  # a bug must not kill the writer: the state is merely recomputed later
                log.exception("saving a KV state failed")
            finally:
                with self._lock:
                    self._pending -= 1
                    self._idle.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued writes are on disk (tests, shutdown); False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        self.flush(timeout)
        with self._lock:
            writer = self._writer
        if writer is not None and writer.is_alive():
            self._queue.put(None)
            writer.join(timeout)
