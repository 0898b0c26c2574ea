"""The LMDB environment behind one workspace index: opening, short transactions, growth, errors.

* One environment per workspace under ``fimble.paths.index_root()/<name>-<hash of the real path>``.
* LMDB forbids opening an environment twice in a process, so stores are shared through a registry and
  reference-counted; ``open_store``/``Store.close`` pair up.
* ``reader_check()`` runs at open: it frees reader slots left by processes that died (SIGKILL).
* ``write(fn)`` runs ``fn`` in one write transaction and commits; when the map is full it aborts, doubles
  the map (up to ``max_map_bytes``) and runs ``fn`` again, so ``fn`` must only depend on its inputs.
  A failed commit leaves the previous state intact: that is what makes ``DiskFull`` lose nothing.
* Commits sync the data but not the meta page (``metasync=False``, synced by the next commit): a killed
  process loses nothing committed; a system crash keeps the store consistent but may undo its last
  transaction, which the next pass redoes. Half the syncs of a full build.
* ``set_mapsize`` must not run while this process has a transaction open; a small gate lets reads and
  writes share the environment and makes a resize wait for them (reads are short, so it never waits
  long). Reads in another process that meet a grown map adopt the new size and retry.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import lmdb

from fimble.errors import DiskFull, IndexNotReady, IndexStoreError
from fimble.indexer.records import DB_NAMES, DUPSORT, SCHEMA

__all__ = ["Store", "open_store", "store_dir"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_LOW_DISK = 16 * 1024 * 1024


def store_dir(index_root: Path, workspace: Path) -> Path:
    """Where a workspace's store lives: readable name plus a hash of the resolved path."""
    real = os.path.realpath(workspace)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(real) or "root")[:40]
    return index_root / f"{name}-{digest}"


class _Gate:
    """Shared for transactions, exclusive for ``set_mapsize``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._resizing = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()


class Store:
    """An open environment and its named sub-databases (``store.db["files"]`` ...)."""

    def __init__(self, path: Path, root: str, *, map_bytes: int, max_map_bytes: int) -> None:
        self.path = path
        self.root = root
        self.max_map_bytes = max_map_bytes
        self._gate = _Gate()
        self._refs = 0
        self._writer_claimed = False
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.env = lmdb.open(
                str(path),
                map_size=map_bytes,
                max_dbs=len(DB_NAMES) + 2,
                max_readers=256,
                readahead=False,
                meminit=False,
                metasync=False,  # one sync per commit instead of two, see the module docstring
                mode=0o600,
            )
        except lmdb.Error as exc:
            raise translate(exc, path, root) from exc
        except OSError as exc:
            if exc.errno in _FULL_ERRNOS:
                raise DiskFull(f"no space to create the index store at {path}; free some disk space") from exc
            raise IndexStoreError(
                f"cannot open the index store at {path}: {exc.strerror}; check its permissions or set "
                "FIMBLE_HOME to a writable directory"
            ) from exc
        stale = self.env.reader_check()
        if stale:
            log.info("cleared %d stale reader slot(s) in %s", stale, path)
        self.db: dict[str, lmdb._Database] = {}
        self.write(self._open_dbs)

    def _open_dbs(self, txn: lmdb.Transaction) -> None:
        for name in DB_NAMES:
            self.db[name] = self.env.open_db(name.encode(), txn=txn, **DUPSORT.get(name, {}))

    # -- schema -------------------------------------------------------------------------------------

    def schema(self) -> bytes | None:
        with self.read() as txn:
            return txn.get(b"schema", db=self.db["meta"])

    def reset(self) -> None:
        """Empty every sub-database and stamp the current schema (one transaction)."""

        def _reset(txn: lmdb.Transaction) -> None:
            for name in DB_NAMES:
                txn.drop(self.db[name], delete=False)
            txn.put(b"schema", SCHEMA, db=self.db["meta"])

        self.write(_reset)

    def check_schema(self, *, can_reset: bool) -> None:
        found = self.schema()
        if found == SCHEMA:
            return
        if not can_reset:
            raise IndexNotReady(
                f"the index of {self.root} was built by another fimble version; "
                "run `fimble index` to rebuild it"
            )
        if found is not None:
            log.warning("index schema changed (%r -> %r): rebuilding %s", found, SCHEMA, self.root)
        self.reset()

    # -- transactions -------------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction]:
        """A short read-only snapshot; never waits for the writer (only, rarely, for a resize)."""
        while True:
            with self._gate.shared():
                try:
                    txn = self.env.begin(buffers=False)
                except lmdb.MapResizedError:
                    txn = None
                except lmdb.Error as exc:
                    raise translate(exc, self.path, self.root) from exc
                if txn is not None:
                    try:
                        yield txn
                    finally:
                        txn.abort()
                    return
            self._adopt_map_size()

    def write(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``fn`` in one write transaction and commit it, growing the map as needed."""
        while True:
            try:
                with self._gate.shared():
                    txn = self.env.begin(write=True)
                    try:
                        result = fn(txn)
                    except BaseException:
                        txn.abort()
                        raise
                    txn.commit()
                return result
            except lmdb.MapFullError:
                self._grow()
            except lmdb.MapResizedError:
                self._adopt_map_size()
            except lmdb.Error as exc:
                raise translate(exc, self.path, self.root) from exc

    def _grow(self) -> None:
        with self._gate.exclusive():
            current = self.env.info()["map_size"]
            if current >= self.max_map_bytes:
                raise DiskFull(
                    f"the index of {self.root} reached its size limit ({self.max_map_bytes >> 20} MiB); "
                    "raise index.max_map_bytes or exclude large folders; nothing stored was lost"
                )
            new = min(self.max_map_bytes, current * 2)
            log.info("index map full at %d MiB: growing to %d MiB", current >> 20, new >> 20)
            self.env.set_mapsize(new)

    def _adopt_map_size(self) -> None:
        with self._gate.exclusive():
            self.env.set_mapsize(0)  # 0 = adopt the size another process grew the map to

    # -- facts ----------------------------------------------------------------------------------------

    def size_bytes(self) -> int:
        try:
            return os.path.getsize(self.path / "data.mdb")
        except OSError:
            return 0

    def map_bytes(self) -> int:
        return int(self.env.info()["map_size"])

    def claim_writer(self) -> bool:
        """At most one writer per store in this process (the other processes are kept out by a lock)."""
        if self._writer_claimed:
            return False
        self._writer_claimed = True
        return True

    def release_writer(self) -> None:
        self._writer_claimed = False

    def close(self) -> None:
        with _registry_lock:
            self._refs -= 1
            if self._refs > 0:
                return
            _registry.pop(str(self.path), None)
        with self._gate.exclusive():
            self.env.close()


def translate(exc: lmdb.Error, path: Path, root: str) -> IndexStoreError:
    """Map an LMDB failure to fimble's error tree; a full disk is told apart from corruption."""
    code = getattr(exc, "code", 0)
    if code in _FULL_ERRNOS or (code == errno.EIO and _looks_full(path)):
        return DiskFull(
            f"no space left for the index of {root} (store {path}); free some disk space and run "
            "`fimble index` again; nothing stored was lost"
        )
    return IndexStoreError(
        f"the index store at {path} failed ({exc}); run `fimble index --rebuild {root}` if this persists"
    )


def _looks_full(path: Path) -> bool:
    """LMDB reports a short write as EIO; decide whether the disk (or a file-size limit) is why."""
    try:
        if shutil.disk_usage(path).free < _LOW_DISK:
            return True
    except OSError:
        return False
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        size = os.path.getsize(path / "data.mdb")
        return soft != resource.RLIM_INFINITY and size + _LOW_DISK >= soft
    except (ImportError, OSError, ValueError):
        return False


_registry: dict[str, Store] = {}
_registry_lock = threading.Lock()


def open_store(path: Path, root: str, *, map_bytes: int, max_map_bytes: int) -> Store:
    """The process-wide store for ``path``, opened on first use."""
    key = str(path)
    with _registry_lock:
        store = _registry.get(key)
        if store is None:
            store = Store(path, root, map_bytes=map_bytes, max_map_bytes=max_map_bytes)
            _registry[key] = store
        store._refs += 1
        return store
