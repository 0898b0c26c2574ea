"""One full pass over a workspace: walk, compare with the store, analyse what changed, purge the rest.

A file whose size and mtime match its record is not even opened; one whose stat changed is hashed and
only parsed if its content did. Removals are committed first (so a rename frees its names before the
new path adds them), then analysed files are committed in batches bounded by count and time. The pass
yields to completions (``Gate``) between files and stops early, with everything so far committed, when
asked to. Big passes parse in a pool of niced processes: tree-sitter holds the GIL while parsing, so
threads would not help. The workers fork from a forkserver (``pool_context``), and while the first one
comes up this thread analyses the smallest files itself (``_start_pool``).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.process
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import BaseContext
from pathlib import Path

from fimble.indexer.config import IndexConfig
from fimble.indexer.gate import Gate
from fimble.indexer.ignore import IgnoreRules
from fimble.indexer.languages import detect_language
from fimble.indexer.records import FileRecord, loads
from fimble.indexer.store import Store
from fimble.indexer.types import PassReport, Progress
from fimble.indexer.walker import FileEntry, WalkStats, walk
from fimble.indexer.worker import (
    FileDoc,
    Remove,
    Skip,
    Task,
    Touch,
    WorkerConfig,
    analyze_group,
    analyze_path,
    init_worker,
)
from fimble.indexer.writer import Op, apply_batch

__all__ = ["ProgressFn", "pool_context", "run_pass", "worker_config"]

log = logging.getLogger(__name__)

ProgressFn = Callable[[Progress], None]
_GROUP_FILES = 32
_GROUP_BYTES = 768 * 1024
# Groups queued per worker: enough that the workers keep parsing while this thread commits a batch
# (and waits for the disk), few enough that results never pile up in memory.
_INFLIGHT_PER_WORKER = 4
_PRELOAD = ("__main__", "fimble.indexer.worker", "fimble.indexer.parse", "fimble.indexer.terms")
# The watchdog: how often the pass looks at its workers while it waits for results, and how long a
# dead worker may go unnoticed by the pool before the pass gives up on the pool.
_WATCH_S = 0.5
_DEAD_GRACE_S = 2.0


def pool_context() -> BaseContext:
    """Where pool workers come from: forked by multiprocessing's forkserver, which imports what a
    worker needs (numpy, tree-sitter, this package) once, so each worker starts in milliseconds
    instead of the ~0.2 s of CPU a spawned one spends importing. (``__main__`` is asked for too, but
    Python 3.11's forkserver never receives the main script's path, so each worker still imports a
    script run as ``fimble`` again as ``__mp_main__``; ``python -m fimble`` is exempt.) The
    forkserver is a fresh interpreter that runs no threads, so forking it is safe even in the
    language server, whose process runs llama.cpp's threads (forking that process itself is not).
    It stays up until this process exits, so later passes pay nothing. Where there is no
    forkserver (Windows), workers are spawned."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD))  # (a no-op once the forkserver runs)
    return context


def worker_config(config: IndexConfig) -> WorkerConfig:
    return WorkerConfig(config.max_file_bytes, config.window_stride_lines, config.window_block_bytes)


def known_files(store: Store, *, skipped: bool = False) -> dict[str, tuple[int, int, bytes | None]]:
    """path -> (size, mtime_ns, digest) for every indexed file (and, with ``skipped``, every file
    remembered as binary/unreadable, digest None), from one snapshot."""
    out: dict[str, tuple[int, int, bytes | None]] = {}
    with store.read() as txn:
        if skipped:
            for key, value in txn.cursor(db=store.db["skipped"]):
                size, mtime_ns, _ = loads(value)
                out[key.decode("utf-8", "surrogateescape")] = (size, mtime_ns, None)
        for key, value in txn.cursor(db=store.db["files"]):
            rec = FileRecord.unpack(value)
            out[key.decode("utf-8", "surrogateescape")] = (rec.size, rec.mtime_ns, rec.digest)
    return out


class _Committer:
    """Collects analysed files and commits them in bounded batches."""

    def __init__(
        self, store: Store, config: IndexConfig, known: dict[str, tuple[int, int, bytes | None]]
    ) -> None:
        self.store = store
        self.config = config
        self.known = known
        self.ops: list[Op] = []
        self.started = time.monotonic()
        self.parsed = self.touched = self.skipped = self.bytes = self.pending_bytes = 0

    def add(self, result: FileDoc | Touch | Skip) -> None:
        if isinstance(result, FileDoc):
            self.parsed += 1
            self.bytes += result.size
            self.pending_bytes += result.size
            self.ops.append(result)
        elif isinstance(result, Touch):
            self.touched += 1
            self.ops.append(result)
        else:
            self.skipped += 1
            self.ops.append(result)  # remembered (and dropped from the index if it was there)
        elapsed = time.monotonic() - self.started
        if (
            len(self.ops) >= self.config.batch_files
            or self.pending_bytes >= self.config.batch_bytes
            or elapsed >= self.config.batch_seconds
        ):
            self.flush()

    def flush(self, *, ready: bool = False) -> None:
        if self.ops or ready:
            apply_batch(self.store, self.ops, ready=ready)
            self.ops = []
        self.pending_bytes = 0
        self.started = time.monotonic()


def run_pass(
    store: Store,
    root: Path,
    config: IndexConfig,
    rules: IgnoreRules,
    gate: Gate,
    stop: threading.Event,
    progress: ProgressFn | None = None,
) -> PassReport:
    """Bring the store in line with the files under ``root``; see the module docstring."""
    began = time.monotonic()
    known = known_files(store, skipped=True)
    stats = WalkStats()
    entries = list(walk(root, rules, max_bytes=config.max_file_bytes, stats=stats))
    seen = {e.rel for e in entries}
    removed = [Remove(rel) for rel in known if rel not in seen]
    for start in range(0, len(removed), 512):
        apply_batch(store, removed[start : start + 512])
    todo = [e for e in entries if (e.rel not in known) or known[e.rel][:2] != (e.size, e.mtime_ns)]
    committer = _Committer(store, config, known)
    total_bytes = sum(e.size for e in todo)
    tracker = _Tracker(progress, len(todo), total_bytes)
    tracker.report()
    tasks = [Task(e.rel, e.path, known[e.rel][2] if e.rel in known else None) for e in todo]
    use_pool = config.workers > 1 and len(tasks) >= config.pool_min_files
    finished = (
        _analyze_pooled(tasks, todo, config, committer, gate, stop, tracker)
        if use_pool
        else _analyze_here(tasks, todo, config, committer, gate, stop, tracker)
    )
    committer.flush(ready=finished and not stop.is_set())
    return PassReport(
        scanned=len(entries),
        parsed=committer.parsed,
        unchanged=len(entries) - len(todo),
        touched=committer.touched,
        removed=len(removed),
        skipped=committer.skipped,
        bytes_parsed=committer.bytes,
        seconds=round(time.monotonic() - began, 3),
        ignored=stats.ignored,
        secrets=stats.secrets,
        too_large=stats.too_large,
        loops=stats.loops,
        symlinks_outside=stats.symlinks_outside,
    )


class _Tracker:
    def __init__(self, callback: ProgressFn | None, files: int, total_bytes: int) -> None:
        self.callback = callback
        self.files = files
        self.total_bytes = total_bytes
        self.done = 0
        self.bytes = 0

    def advance(self, files: int, nbytes: int) -> None:
        self.done += files
        self.bytes += nbytes
        self.report()

    def report(self) -> None:
        if self.callback is not None:
            self.callback(Progress(self.done, self.files, self.bytes, self.total_bytes))


def _yield_to_completions(committer: _Committer, gate: Gate, stop: threading.Event) -> bool:
    """Wait while a completion runs; commit first so no finished work waits in memory meanwhile."""
    if not gate.idle:
        committer.flush()
    return gate.wait_idle(stop)


def _analyze_here(
    tasks: list[Task],
    entries: list[FileEntry],
    config: IndexConfig,
    committer: _Committer,
    gate: Gate,
    stop: threading.Event,
    tracker: _Tracker,
) -> bool:
    wcfg = worker_config(config)
    for task, entry in zip(tasks, entries, strict=True):
        if stop.is_set() or not _yield_to_completions(committer, gate, stop):
            return False
        committer.add(analyze_path(task, wcfg))
        tracker.advance(1, entry.size)
    return True


def _groups(tasks: list[Task], entries: list[FileEntry]) -> list[tuple[list[Task], int]]:
    """Tasks (biggest files first) in groups of a few files, each of one language, ordered by their
    biggest file.

    A worker compiles a language's query when it first meets one of its files, which costs up to a
    tenth of a second (C++): a language with a handful of files in the workspace then costs one
    compilation, in one worker, instead of one per worker. The language is guessed from the name
    alone; a wrong guess costs time, never correctness."""
    by_language: dict[str, list[tuple[Task, int]]] = {}
    for task, entry in zip(tasks, entries, strict=True):
        by_language.setdefault(detect_language(task.rel), []).append((task, entry.size))
    groups: list[tuple[int, list[Task], int]] = []
    for members in by_language.values():
        current: list[Task] = []
        size = biggest = 0
        for task, nbytes in members:
            if not current:
                biggest = nbytes
            current.append(task)
            size += nbytes
            if len(current) >= _GROUP_FILES or size >= _GROUP_BYTES:
                groups.append((biggest, current, size))
                current, size = [], 0
        if current:
            groups.append((biggest, current, size))
    groups.sort(key=lambda group: -group[0])  # (stable: a language's groups keep their order)
    return [(group, size) for _, group, size in groups]


def _analyze_pooled(
    tasks: list[Task],
    entries: list[FileEntry],
    config: IndexConfig,
    committer: _Committer,
    gate: Gate,
    stop: threading.Event,
    tracker: _Tracker,
) -> bool:
    by_size = sorted(range(len(tasks)), key=lambda i: -entries[i].size)  # big files first: no long tail
    groups = _groups([tasks[i] for i in by_size], [entries[i] for i in by_size])
    pool = ProcessPoolExecutor(
        max_workers=config.workers,
        mp_context=pool_context(),
        initializer=init_worker,
        initargs=(worker_config(config), config.worker_nice, os.getpid()),
    )
    inflight: dict[Future, tuple[list[Task], int]] = {}
    next_group = 0
    watchdog = _Watchdog(pool)
    try:
        if groups and not stop.is_set() and _yield_to_completions(committer, gate, stop):
            inflight[_start_pool(pool, groups, config, committer, gate, stop, tracker)] = groups[0]
            next_group = 1
        while next_group < len(groups) or inflight:
            while next_group < len(groups) and len(inflight) < _INFLIGHT_PER_WORKER * config.workers:
                if stop.is_set() or not _yield_to_completions(committer, gate, stop):
                    break
                group = groups[next_group]
                inflight[pool.submit(analyze_group, group[0])] = group
                next_group += 1
            if not inflight:
                return False
            done, _ = wait(inflight, timeout=_WATCH_S, return_when=FIRST_COMPLETED)
            if not done:
                watchdog.check()  # raises BrokenProcessPool for a pool that died without saying so
            for future in done:
                group_tasks, size = inflight[future]
                try:
                    results = future.result()
                except BrokenProcessPool:
                    raise  # (its group stays in ``inflight``, so the fallback below analyses it)
                except Exception:
                    log.exception("indexing worker failed; analysing %d file(s) in-process", len(group_tasks))
                    results = [analyze_path(t, worker_config(config)) for t in group_tasks]
                del inflight[future]  # only now: a group leaves ``inflight`` when its results are in
                for result in results:
                    committer.add(result)
                tracker.advance(len(group_tasks), size)
            if stop.is_set() and not inflight:
                return False
    except BrokenProcessPool as err:
        # Every group is in exactly one place here: committed (its results were added), in
        # ``inflight`` (submitted, results not taken, whatever state its future is in) or in
        # ``groups[next_group:]`` (not submitted yet). The last two are analysed here, so the pass
        # ends with the same index as one the pool finished.
        log.warning("the indexing pool died (%s); finishing the pass in-process", err)
        watchdog.abandon()
        rest = [t for g, _ in list(inflight.values()) + groups[next_group:] for t in g]
        by_rel = {e.rel: e for e in entries}
        return _analyze_here(rest, [by_rel[t.rel] for t in rest], config, committer, gate, stop, tracker)
    finally:
        if not watchdog.abandoned:
            pool.shutdown(wait=True, cancel_futures=True)
    return not stop.is_set()


class _Watchdog:
    """Notices a worker that died without the pool noticing, and lets go of such a pool.

    CPython's ``ProcessPoolExecutor`` marks itself broken when a worker dies, except when the worker
    dies *while sending a result*: its manager thread then waits forever for the rest of a message
    that will never come (and the dead worker holds the result pipe's lock, so the other workers
    block too). Every future stays pending, ``wait`` never returns, and ``shutdown(wait=True)`` and
    the interpreter's exit hang on that thread. So the pass checks its workers' pids while it waits,
    treats a worker dead for ``_DEAD_GRACE_S`` as a broken pool, and ``abandon`` kills the workers
    and closes this process's end of the result pipe, which ends the manager thread's read (EOF).
    The pool's internals (``_processes``, ``_result_queue``) are used only here, defensively: a
    pool without them (another Python, a test double) is only shut down without waiting.
    """

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool
        self.abandoned = False
        self._dead_since: float | None = None

    def _workers(self) -> list[multiprocessing.process.BaseProcess]:
        processes = getattr(self.pool, "_processes", None) or {}
        return list(processes.values())

    def check(self) -> None:
        dead = [p for p in self._workers() if p.exitcode is not None]
        if not dead:
            self._dead_since = None
            return
        now = time.monotonic()
        if self._dead_since is None:
            self._dead_since = now
        elif now - self._dead_since >= _DEAD_GRACE_S:
            codes = ", ".join(f"pid {p.pid} exit {p.exitcode}" for p in dead)
            raise BrokenProcessPool(f"an indexing worker died and the pool did not notice ({codes})")

    def abandon(self) -> None:
        """Stop the pool now, whatever state its manager thread is in; never waits on it."""
        self.abandoned = True
        workers = self._workers()
        for process in workers:
            with contextlib.suppress(Exception):
                process.kill()
        for process in workers:
            with contextlib.suppress(Exception):
                process.join(5)
        writer = getattr(getattr(self.pool, "_result_queue", None), "_writer", None)
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.close()  # the workers' copies died with them: the manager thread reads EOF
        self.pool.shutdown(wait=False, cancel_futures=True)


def _start_pool(
    pool: ProcessPoolExecutor,
    groups: list[tuple[list[Task], int]],
    config: IndexConfig,
    committer: _Committer,
    gate: Gate,
    stop: threading.Event,
    tracker: _Tracker,
) -> Future:
    """Submit the first group, and analyse the smallest groups here (from the end of the queue)
    until that submission returns. It returns once the first worker exists: a fresh forkserver
    first imports numpy and tree-sitter, ~0.2 s on one core, while the other core would sit idle."""
    submitted: list[Future | BaseException] = []

    def submit() -> None:
        try:
            submitted.append(pool.submit(analyze_group, groups[0][0]))
        except BaseException as err:  # (BrokenProcessPool): raised again in the caller's thread
            submitted.append(err)

    starter = threading.Thread(target=submit, name="fimble-index-pool-start", daemon=True)
    starter.start()
    wcfg = worker_config(config)
    while starter.is_alive() and len(groups) > 1 and not stop.is_set() and gate.idle:
        group_tasks, size = groups.pop()
        for task in group_tasks:
            committer.add(analyze_path(task, wcfg))
        tracker.advance(len(group_tasks), size)
    starter.join()
    if isinstance(submitted[0], BaseException):
        raise submitted[0]
    return submitted[0]
