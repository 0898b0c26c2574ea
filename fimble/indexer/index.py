"""``WorkspaceIndex``: the one object the rest of fimble uses to build, update and query an index.

Reads (``definitions``, ``file_outline``, ``imports_of``, ``resolve_spec``, ``symbols_near``, ``search``,
``stats``) each run in one short LMDB read transaction: a consistent snapshot that never waits for the
writer. Writes all go through one ``Updater`` thread. A writable index holds the store's writer lock,
so a second process gets ``IndexLocked`` at once; ``writable=False`` opens for queries only and works
alongside a writer (the CLI's ``--find`` next to a running server).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fimble import paths
from fimble.errors import IndexLocked, IndexNotReady, IndexStoreError, InputError
from fimble.indexer import reader
from fimble.indexer.config import IndexConfig
from fimble.indexer.gate import Gate
from fimble.indexer.ignore import IgnoreRules
from fimble.indexer.lock import WriterLock
from fimble.indexer.records import Stats, loads
from fimble.indexer.store import Store, open_store, store_dir
from fimble.indexer.types import Definition, Import, IndexStats, PassReport, Progress, Snippet, SymbolsNear

if TYPE_CHECKING:
    from fimble.indexer.updater import Updater
    from fimble.indexer.watch import Watcher

__all__ = ["WorkspaceIndex"]


def _check_root(root: Path) -> Path:
    if not root.exists():
        raise InputError(f"{root} does not exist; pass the folder of your project")
    if not root.is_dir():
        raise InputError(f"{root} is not a folder; pass the folder of your project")
    try:
        with os.scandir(root):
            pass
    except PermissionError as err:
        raise InputError(f"cannot read {root}: permission denied; check its permissions") from err
    except OSError as err:
        raise InputError(f"cannot read {root}: {err.strerror}; check the path") from err
    return root


class WorkspaceIndex:
    """The persistent index of one workspace. Use ``WorkspaceIndex.open(root)``; close it when done
    (or use it as a context manager)."""

    def __init__(self, root: Path, store: Store, config: IndexConfig, lock: WriterLock | None) -> None:
        self.root = root
        self.config = config
        self.gate = Gate()
        self._store = store
        self._lock = lock
        self._ready = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._rules = IgnoreRules(
            root, exclude=config.exclude, deny=config.deny, use_gitignore=config.use_gitignore
        )
        self._updater: Updater | None = None  # created on the first write: opening stays cheap
        self._watcher: Watcher | None = None

    @classmethod
    def open(
        cls, root: str | os.PathLike[str], config: IndexConfig | None = None, *, writable: bool = True
    ) -> WorkspaceIndex:
        """Open (creating if needed) the index of ``root``.

        Raises ``InputError`` for a missing or unreadable root, ``IndexLocked`` when another process
        writes this index, ``IndexNotReady`` when opening read-only an index that does not exist yet,
        ``DiskFull`` when the store cannot be created.
        """
        config = config or IndexConfig()
        root = _check_root(Path(os.path.abspath(os.path.expanduser(root))))
        path = store_dir(paths.index_root(), root)
        if not writable and not (path / "data.mdb").exists():
            raise IndexNotReady(f"{root} has no index yet; run `fimble index {root}`")
        store = open_store(path, str(root), map_bytes=config.map_bytes, max_map_bytes=config.max_map_bytes)
        lock: WriterLock | None = None
        try:
            if writable:
                if not store.claim_writer():
                    raise IndexLocked(f"the index of {root} is already open for writing in this process")
                lock = WriterLock(path / "writer.lock", str(root))
                try:
                    lock.acquire()
                except BaseException:
                    store.release_writer()
                    raise
            store.check_schema(can_reset=writable)
        except BaseException:
            if lock is not None:
                lock.release()
                store.release_writer()
            store.close()
            raise
        return cls(root, store, config, lock)

    # -- writing -------------------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._lock is not None

    def _writer(self) -> Updater:
        if self._closed:
            raise IndexStoreError("this index was closed; open it again")
        if self._lock is None:
            raise IndexStoreError("this index was opened read-only; open it with writable=True to update it")
        if self._updater is None:
            from fimble.indexer.updater import Updater  # numpy, and tree-sitter when it parses

            self._updater = Updater(self._store, self.root, self.config, self._rules, self.gate)
        return self._updater

    def build(
        self,
        *,
        rebuild: bool = False,
        progress: Callable[[Progress], None] | None = None,
        timeout: float | None = None,
    ) -> PassReport:
        """Run a full pass now and wait for it (``rebuild`` empties the store first).

        ``progress`` is called with ``Progress`` values from the writer thread.
        """
        future = self._writer().request_pass(rebuild=rebuild, progress=progress)
        report = future.result(timeout)
        if rebuild:
            self._ready = False
        return report

    def start(self, *, watch: bool = True, initial_pass: bool = True) -> None:
        """Server mode: index in the background (pass, then watcher events) and return at once."""
        updater = self._writer()
        if initial_pass:
            updater.warm_grammars(after=updater.request_pass())
        else:
            updater.start()
            updater.warm_grammars()
        if watch and self._watcher is None:
            from fimble.indexer.watch import Watcher

            self._watcher = Watcher(
                self.root,
                self._rules,
                updater,
                debounce=self.config.debounce_seconds,
                store_path=self._store.path,
            )
            self._watcher.start()

    def is_secret(self, rel: str) -> bool:
        """Whether the workspace-relative ``rel`` is on the secrets list (defaults plus ``deny``)."""
        return self._rules.is_secret(rel)

    def update_buffer(self, path: str | os.PathLike[str], text: str | bytes) -> bool:
        """Index an editor buffer (saved or not) for ``path``; False when the path is outside the
        workspace, ignored, or a secret (then nothing of it is stored)."""
        rel = self.relpath(path)
        if rel is None or not self._rules.allowed(rel):
            return False
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
        self._writer().change(rel, "buffer", data)
        return True

    def update_file(self, path: str | os.PathLike[str]) -> bool:
        """Re-read ``path`` from disk (or drop it if it is gone); False when it cannot be indexed."""
        rel = self.relpath(path)
        if rel is None or not self._rules.allowed(rel):
            return False
        self._writer().change(rel, "file")
        return True

    def remove_file(self, path: str | os.PathLike[str]) -> None:
        rel = self.relpath(path)
        if rel is not None:
            self._writer().change(rel, "remove")

    def flush(self, timeout: float | None = None, *, maintenance: bool = False) -> bool:
        """Wait until every requested update is stored; True unless ``timeout`` ran out. With
        ``maintenance``, also wait for the postings compaction that runs after updates."""
        return self._updater.flush(timeout, maintenance=maintenance) if self._updater is not None else True

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Wrap a completion: background indexing waits until it is over."""
        with self.gate.busy():
            yield

    def pause(self) -> None:
        self.gate.pause()

    def resume(self) -> None:
        self.gate.resume()

    # -- reading -------------------------------------------------------------------------------------

    def relpath(self, path: str | os.PathLike[str]) -> str | None:
        """Workspace-relative POSIX path, or None when ``path`` is outside the workspace."""
        raw = os.fspath(path)
        if not os.path.isabs(raw):
            rel = os.path.normpath(raw)
        else:
            rel = os.path.relpath(os.path.normpath(raw), self.root)
            if rel.startswith(".."):
                real = os.path.realpath(raw)
                rel = os.path.relpath(real, os.path.realpath(self.root))
        rel = rel.replace(os.sep, "/")
        if rel == "." or rel == ".." or rel.startswith("../"):
            return None
        return rel

    @contextmanager
    def _snapshot(self):
        if self._closed:
            raise IndexStoreError("this index was closed; open it again")
        with self._store.read() as txn:
            if not self._ready:
                raw = txn.get(b"ready", db=self._store.db["meta"])
                if raw is None:
                    raise IndexNotReady(
                        f"the index of {self.root} is still being built; completions go on without "
                        "repository context until it is done"
                    )
                self._ready = True
            yield txn

    def definitions(self, name: str, *, prefix: bool = False, limit: int = 50) -> tuple[Definition, ...]:
        """Where ``name`` (or ``Type.name``, ``ns::Type::name``) is defined; ``prefix`` matches starts."""
        with self._snapshot() as txn:
            return reader.definitions(txn, self._store.db, name, prefix=prefix, limit=limit)

    def has_file(self, path: str | os.PathLike[str]) -> bool:
        """Whether the index holds ``path`` (an empty ``__init__.py`` too: it makes a package)."""
        rel = self.relpath(path)
        if rel is None:
            return False
        with self._snapshot() as txn:
            return reader.TxnFiles(txn, self._store.db).exists(rel)

    def files_in(self, rel_dir: str) -> list[str]:
        """The indexed files directly in the workspace folder ``rel_dir`` ("" for the root), no
        subfolders: what a barrel file (``index.ts``) could re-export next to what it already does."""
        with self._snapshot() as txn:
            return reader.TxnFiles(txn, self._store.db).in_dir(rel_dir.strip("/"))

    def folders_in(self, rel_dir: str) -> list[str]:
        """The workspace folders directly in ``rel_dir`` that hold indexed files: what an ES import
        can name as a directory (its ``index`` module) beside the files of ``files_in``."""
        with self._snapshot() as txn:
            return reader.TxnFiles(txn, self._store.db).dir_entries(rel_dir.strip("/"))[1]

    def file_outline(self, path: str | os.PathLike[str]) -> tuple[Definition, ...]:
        """A file's definitions in source order: signatures and first doc lines, no bodies."""
        rel = self.relpath(path)
        if rel is None:
            return ()
        with self._snapshot() as txn:
            return reader.outline(txn, self._store.db, rel)

    def imports_of(self, path: str | os.PathLike[str]) -> tuple[Import, ...]:
        """A file's imports with the workspace files each resolves to."""
        rel = self.relpath(path)
        if rel is None:
            return ()
        with self._snapshot() as txn:
            return reader.imports_of(txn, self._store.db, rel)

    def resolve_spec(self, path: str | os.PathLike[str], spec: str) -> tuple[str, ...]:
        """The workspace files an import of ``spec`` in ``path`` would point at (as ``imports_of``
        resolves them): whether a module being typed names one yet."""
        rel = self.relpath(path)
        if rel is None:
            return ()
        with self._snapshot() as txn:
            return reader.resolve_spec(txn, self._store.db, rel, spec)

    def symbols_near(
        self, path: str | os.PathLike[str], line: int, *, radius: int = 12, limit: int = 24
    ) -> SymbolsNear:
        """What the code at ``line`` (0-based) is inside of and refers to; see ``SymbolsNear``."""
        rel = self.relpath(path)
        if rel is None:
            return SymbolsNear(os.fspath(path), line, (), ())
        with self._snapshot() as txn:
            return reader.symbols_near(txn, self._store.db, rel, line, radius=radius, limit=limit)

    def identifiers(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        """The identifiers a file uses (sorted, language keywords left out)."""
        rel = self.relpath(path)
        if rel is None:
            return ()
        with self._snapshot() as txn:
            return reader.identifiers(txn, self._store.db, rel)

    def search(
        self, text: str, k: int = 5, exclude: tuple[str | os.PathLike[str], tuple[int, int]] | None = None
    ) -> tuple[Snippet, ...]:
        """BM25 over text windows of the whole workspace; ``exclude=(path, (first_line, last_line))``
        leaves out windows overlapping those lines of that file (what the prompt already has)."""
        skip = None
        if exclude is not None:
            rel = self.relpath(exclude[0])
            skip = (rel, (int(exclude[1][0]), int(exclude[1][1]))) if rel is not None else None
        from fimble.indexer import bm25  # numpy: loaded on the first search, not at open

        with self._snapshot() as txn:
            return bm25.search(txn, self._store.db, text, k, exclude=skip)

    def stats(self) -> IndexStats:
        """Counts and sizes; never raises ``IndexNotReady`` (``ready`` says whether it is built)."""
        if self._closed:
            raise IndexStoreError("this index was closed; open it again")
        store = self._store
        with store.read() as txn:
            db = store.db
            meta = Stats.unpack(txn.get(b"stats", db=db["meta"]))
            ready_raw = txn.get(b"ready", db=db["meta"])
            files = txn.stat(db["files"])["entries"]
            segments = txn.stat(db["segs"])["entries"]
            stale = len(txn.get(b"dead", db=db["meta"]) or b"") // 4
        languages = meta.languages
        parsed = sum(n for lang, n in languages if lang != "text")
        return IndexStats(
            root=str(self.root),
            store_path=str(store.path),
            ready=ready_raw is not None,
            files=files,
            parsed_files=parsed,
            definitions=meta.definitions,
            blocks=meta.blocks,
            segments=segments,
            stale_versions=stale,
            store_bytes=store.size_bytes(),
            map_bytes=store.map_bytes(),
            languages=languages,
            last_pass_at=loads(ready_raw)[1] if ready_raw else None,
            pending_updates=self._updater.pending if self._updater is not None else 0,
            paused=self.gate.paused,
        )

    @property
    def last_error(self) -> Exception | None:
        """The last failure of the background writer (e.g. ``DiskFull``), cleared by a good pass."""
        return self._updater.last_error if self._updater is not None else None

    # -- lifetime ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop watching and writing (committed work is kept), release the lock, close the store."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self.gate.resume()
        if self._watcher is not None:
            self._watcher.stop()
        if self._updater is not None:
            self._updater.stop()
        if self._lock is not None:
            self._lock.release()
            self._store.release_writer()
        self._store.close()

    def __enter__(self) -> WorkspaceIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
