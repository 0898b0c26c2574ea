"""The single writer thread of a workspace index.

Every change to the store goes through here, in order: full passes, files the watcher saw change,
editor buffers pushed by the server, removals. Requests for the same path coalesce (the latest wins),
so a burst of keystroke-driven buffer pushes costs one parse. Work is done in small steps: the thread
waits on the ``Gate`` before each file and commits in short transactions, so it never delays a
completion and never holds a write transaction while one runs.

Errors never kill the thread: a full disk is logged and kept in ``last_error`` (the server stays up and
answers from what is stored); a pass's error is also raised to whoever waits on it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from fimble.errors import FimbleError
from fimble.indexer.build import ProgressFn, known_files, run_pass, worker_config
from fimble.indexer.compact import compact
from fimble.indexer.config import IndexConfig
from fimble.indexer.gate import Gate
from fimble.indexer.ignore import IgnoreRules
from fimble.indexer.reader import file_record
from fimble.indexer.records import Stats
from fimble.indexer.store import Store
from fimble.indexer.types import PassReport
from fimble.indexer.worker import Remove, Skip, Task, WorkerConfig, analyze_bytes, analyze_path
from fimble.indexer.writer import Op, apply_batch

__all__ = ["Updater"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Change:
    kind: str  # "file" (re-read from disk), "buffer", "remove", "tree" (remove a directory)
    data: bytes | None = None


def _warm_up(languages: tuple[str, ...] = ()) -> None:
    """Load tree-sitter, numpy, the data tables and the grammars of ``languages`` now, in the
    background: full passes parse in pool processes, so otherwise the first saved buffer would pay
    for them (up to ~200 ms) on its own."""
    try:
        import numpy  # noqa: F401

        from fimble.indexer import ignore, parse, terms
        from fimble.indexer import languages as langs

        langs.detect_language("x.py")
        terms.warm()
        ignore.defaults()
        for name in languages:
            if langs.language_spec(name) is not None:
                parse.warm(name)
    except Exception:  # pragma: no cover - a real failure resurfaces when the file is parsed
        log.debug("warm-up failed", exc_info=True)


class Updater:
    """Owns the writer thread; every method may be called from any thread."""

    def __init__(self, store: Store, root: Path, config: IndexConfig, rules: IgnoreRules, gate: Gate) -> None:
        self.store = store
        self.root = root
        self.config = config
        self.rules = rules
        self.gate = gate
        self.last_error: FimbleError | None = None
        self._cond = threading.Condition()
        self._passes: deque[tuple[bool, ProgressFn | None, Future[PassReport]]] = deque()
        self._changes: dict[str, _Change] = {}
        self._working = False
        self._maintaining = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- requests -----------------------------------------------------------------------------------

    def start(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fimble-indexer", daemon=True)
                self._thread.start()

    def request_pass(
        self, *, rebuild: bool = False, progress: ProgressFn | None = None
    ) -> Future[PassReport]:
        future: Future[PassReport] = Future()
        with self._cond:
            self._passes.append((rebuild, progress, future))
            self._cond.notify_all()
        self.start()
        return future

    def change(self, rel: str, kind: str, data: bytes | None = None) -> None:
        with self._cond:
            self._changes.pop(rel, None)  # re-insert: the dict keeps arrival order
            self._changes[rel] = _Change(kind, data)
            self._cond.notify_all()
        self.start()

    def warm_grammars(self, after: Future[PassReport] | None = None) -> None:
        """In a daemon thread, once ``after`` is done: load the grammars of the languages the index
        holds (grammars and compiled queries are shared by all threads), so that the first buffer
        the editor pushes is not the one that pays ~100 ms for TypeScript's grammar."""

        def run() -> None:
            if after is not None:
                try:
                    after.result()
                except BaseException:
                    return
            with self.store.read() as txn:
                present = Stats.unpack(txn.get(b"stats", db=self.store.db["meta"])).languages
            _warm_up(tuple(name for name, _ in present))

        threading.Thread(target=run, name="fimble-index-warm", daemon=True).start()

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._passes) + len(self._changes) + (1 if self._working else 0)

    def flush(self, timeout: float | None = None, *, maintenance: bool = False) -> bool:
        """Wait until everything requested so far is stored (or ``timeout`` seconds passed); with
        ``maintenance``, also until the segment compaction that follows updates is done."""

        def settled() -> bool:
            busy = self._passes or self._changes or self._working or (maintenance and self._maintaining)
            return not busy or self._stop.is_set()

        with self._cond:
            return self._cond.wait_for(settled, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._cond:
            while self._passes:
                _, _, future = self._passes.popleft()
                future.cancel()

    # -- the thread ---------------------------------------------------------------------------------

    def _run(self) -> None:
        _warm_up()
        while not self._stop.is_set():
            with self._cond:
                self._cond.wait_for(lambda: self._passes or self._changes or self._stop.is_set())
                if self._stop.is_set():
                    break
                job = self._passes.popleft() if self._passes else None
                changes: list[tuple[str, _Change]] = []
                if job is None:
                    while self._changes and len(changes) < self.config.batch_files:
                        rel = next(iter(self._changes))
                        changes.append((rel, self._changes.pop(rel)))
                self._working = True
            self._guarded(self._run_pass, *job) if job is not None else self._guarded(self._apply, changes)
            with self._cond:
                self._working = False  # flush() waits for updates, not for the maintenance below
                self._maintaining = job is None
                self._cond.notify_all()
            if job is None:
                self._guarded(self._compact)
                with self._cond:
                    self._maintaining = False
                    self._cond.notify_all()
        with self._cond:
            self._working = False
            self._cond.notify_all()

    def _guarded(self, fn: Callable[..., object], *args: object) -> None:
        """Run one step; a failure is logged and kept in ``last_error``, never fatal to the thread."""
        try:
            fn(*args)
        except FimbleError as err:
            self.last_error = err
            log.error("index update failed: %s", err)
        except Exception:
            log.exception("index update failed")

    def _run_pass(self, rebuild: bool, progress: ProgressFn | None, future: Future[PassReport]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            if rebuild:
                self.store.reset()
            self.rules.forget()
            report = run_pass(self.store, self.root, self.config, self.rules, self.gate, self._stop, progress)
            self._compact()
        except BaseException as err:
            future.set_exception(err)
            if isinstance(err, FimbleError):
                raise
            return
        self.last_error = None
        future.set_result(report)

    def _compact(self) -> None:
        """Merge postings segments while nothing else is queued (see compact.py)."""

        def busy() -> bool:
            with self._cond:
                return bool(self._passes or self._changes)

        while not busy() and compact(self.store, self.gate, self._stop, interrupt=busy):
            pass

    def _apply(self, changes: list[tuple[str, _Change]]) -> None:
        wcfg = worker_config(self.config)
        ops: list[Op] = []
        for rel, change in changes:
            if not self.gate.wait_idle(self._stop):
                break
            if change.kind == "tree":
                prefix = rel + "/"
                ops += [Remove(r) for r in known_files(self.store) if r.startswith(prefix)]
            elif change.kind == "remove" or not self.rules.allowed(rel):
                ops.append(Remove(rel))
            elif change.kind == "buffer" and change.data is not None:
                if len(change.data) <= self.config.max_file_bytes:
                    ops.append(analyze_bytes(rel, change.data, len(change.data), 0, wcfg))
                else:
                    ops.append(Remove(rel))
            else:
                ops.append(self._from_disk(rel, wcfg))
        apply_batch(self.store, ops)

    def _from_disk(self, rel: str, wcfg: WorkerConfig) -> Op:
        path = os.path.join(self.root, *rel.split("/"))
        real, root = os.path.realpath(path), os.path.realpath(self.root)
        if not os.path.isfile(path) or not real.startswith(root + os.sep):
            return Remove(rel)  # gone, or a symlink leading out of the workspace
        with self.store.read() as txn:
            rec = file_record(txn, self.store.db, rel)
        result = analyze_path(Task(rel, path, rec.digest if rec else None), wcfg)
        return Remove(rel) if isinstance(result, Skip) else result
