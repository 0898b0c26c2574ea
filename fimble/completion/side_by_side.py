"""Independent clients' generations decoded side by side: one pass over the weights per step for all.

On a CPU a decode step costs a read of the whole model whatever the number of rows it computes, so
two clients generating at once cost little more per step than one (the measured curve:
``fimble.batch.width``). The engine worker runs one job at a time, though, so without this two HTTP
clients take turns, each waiting for the other's whole answer.

A generation submitted here is its own ``Job`` to its caller (its future, its cancel token) but runs
inside a group job of kind ``REQUEST`` on the worker. While a group runs as a batch, generations that
arrive join it between two decode steps (``Engine.generate_batch``'s feed), and each caller's future
is resolved as soon as its own sequence stops; a caller that goes away stops its sequence only.
The group takes no newcomer once another job waits in the worker's queue (an editor's keystroke,
another kind of work), so it never holds the model for good: newcomers start the next group, which
waits its turn in the queue.

A lone client keeps the ordinary path. A group that starts with one member, when no two generations
overlapped in the last ``OVERLAP_S``, runs it as an ordinary generation in the interactive slot,
whose KV cache the client's next request reuses (llama.vim's ``cache_prompt``: typing costs a few
tokens). Only overlapping clients pay the batch path's price: a prompt evaluated in full each time.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fimble.completion.engine.batch import Arrival, check_fits
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.prompt.fim import FimPrompt
from fimble.completion.scheduler import Job, JobKind, token_for
from fimble.errors import Cancelled

if TYPE_CHECKING:
    from fimble.completion.completer import BatchItem
    from fimble.completion.engine import Engine, Generation
    from fimble.completion.worker import EngineWorker

__all__ = ["OVERLAP_S", "SideBySide"]

log = logging.getLogger(__name__)

# After two generations overlapped, a group of one runs as a batch for this long, so that the other
# client's next request, a few milliseconds behind, joins it instead of queueing for its turn.
OVERLAP_S = 2.0

Record = Callable[["Generation", float], None]  # a finished generation and its queued ms (stats)


def _never(engine: Engine, cancel: CancelToken) -> Generation:
    raise AssertionError("a member's job runs inside its group's")  # pragma: no cover


@dataclass(eq=False)
class _Member:
    item: BatchItem
    job: Job[Generation]
    submitted: float


@dataclass(eq=False)
class _Group:
    members: list[_Member] = field(default_factory=list)
    taken: int = 0  # members handed to the engine so far
    open: bool = True  # newcomers may still join


def _settle(future: Future[Generation], gen: Generation | None, err: BaseException | None = None) -> None:
    """Resolve a member's future once (a cancelled generation is ``Cancelled``)."""
    if future.done():
        return
    with contextlib.suppress(Exception):  # resolved meanwhile by another thread
        if err is not None:
            future.set_exception(err)
        elif gen is None or gen.stop_reason == "cancelled":
            future.set_exception(Cancelled("cancelled"))
        else:
            future.set_result(gen)


class SideBySide:
    """Groups the generations of clients that overlap; see the module docstring."""

    def __init__(self, worker: EngineWorker, record: Record) -> None:
        self._worker = worker
        self._record = record
        self._lock = threading.RLock()  # futures resolve on the engine thread, whose callbacks lock
        self._queued: _Group | None = None  # submitted to the worker, not started: newcomers join
        self._running: _Group | None = None  # decoding as a batch and open: newcomers join
        self._in_flight = 0
        self._overlap_until = 0.0
        self.groups = 0  # groups run as a batch (for tests)
        self.generations = 0  # generations decoded in such a group (``/metrics``)

    @property
    def in_flight(self) -> int:
        """Generations submitted here and not finished."""
        return self._in_flight

    def submit(self, item: BatchItem) -> Job[Generation]:
        """Queue a generation (no guide, no streamed text) for its caller."""
        job: Job[Generation] = Job(_never, None, cancel=token_for(JobKind.REQUEST), kind=JobKind.REQUEST)
        member = _Member(item, job, time.perf_counter())
        others = self._worker.queued()  # asked before our lock: the worker's is never taken inside it
        with self._lock:
            if self._in_flight:
                self._overlap_until = time.monotonic() + OVERLAP_S
            self._in_flight += 1
            job.future.add_done_callback(self._left)
            running = self._running
            if running is not None and others:  # another job waits: the running group takes no more
                running.open = False
                self._running = running = None
            joined = running if running is not None and running.open else self._queued
            if joined is not None:
                joined.members.append(member)
                return job
            group = self._queued = _Group([member])
        try:
            group_job = self._worker.submit(lambda e, c: self._run(group, e, c), None, JobKind.REQUEST)
        except BaseException as err:
            with self._lock:
                if self._queued is group:
                    self._queued = None
            for m in group.members:
                _settle(m.job.future, None, err)
            raise
        # A group dropped unrun (shutdown) or failing leaves none of its callers waiting.
        group_job.future.add_done_callback(lambda f: self._orphaned(group, f))
        return job

    def _left(self, _future: Future[Generation]) -> None:
        with self._lock:
            self._in_flight -= 1

    def _orphaned(self, group: _Group, future: Future[object]) -> None:
        with self._lock:
            group.open = False
            if self._queued is group:
                self._queued = None
            if self._running is group:
                self._running = None
        err = None if future.cancelled() else future.exception()
        for m in group.members:
            _settle(m.job.future, None, err or Cancelled("shutdown"))

    # -- on the engine thread -------------------------------------------------------------------

    def _run(self, group: _Group, engine: Engine, cancel: CancelToken) -> None:
        batches = bool(getattr(engine, "batch_slots", None))  # a remote backend has none
        with self._lock:
            if self._queued is group:
                self._queued = None
            wanted = [m for m in group.members if not m.job.cancel.cancelled]
            together = batches and (len(wanted) > 1 or time.monotonic() < self._overlap_until)
            if together:
                self._running = group
            else:
                group.open = False
        if not together:
            for m in group.members:
                self._alone(engine, m, cancel)
            return
        self.groups += 1
        order: list[_Member] = []

        def feed(last: bool) -> list[Arrival]:
            while True:
                others = self._worker.queued()
                with self._lock:
                    new = group.members[group.taken :]
                    group.taken = len(group.members)
                    if group.open and (cancel.cancelled or others or (last and not new)):
                        group.open = False
                        if self._running is group:
                            self._running = None
                if not new:
                    return []
                arrivals = [a for m in new if (a := self._arrival(engine, m, order)) is not None]
                if arrivals or not last:
                    return arrivals

        def done(index: int, gen: Generation) -> None:
            m = order[index]
            waited = (time.perf_counter() - m.submitted) * 1000 - gen.prompt_ms - gen.generation_ms
            self._record(gen, max(0.0, waited))
            _settle(m.job.future, gen)

        try:
            engine.generate_batch([], cancel=cancel, on_done=done, keep_interactive=True, feed=feed)
        finally:
            with self._lock:
                group.open = False
                if self._running is group:
                    self._running = None
            for m in group.members:
                _settle(m.job.future, None)

    def _arrival(self, engine: Engine, m: _Member, order: list[_Member]) -> Arrival | None:
        """A member's prompt for the batch, or None when it is gone or cannot run (its caller told)."""
        if m.job.cancel.cancelled:
            _settle(m.job.future, None)
            return None
        try:
            tokens = _tokens(m.item.build(engine))
            check_fits([tokens], engine.n_ctx)
        except Exception as err:
            _settle(m.job.future, None, err)
            return None
        order.append(m)
        self.generations += 1
        return Arrival(tokens, m.item.max_tokens, m.item.stop, m.job.cancel)

    def _alone(self, engine: Engine, m: _Member, cancel: CancelToken) -> None:
        """A member as an ordinary generation (``Completer.submit_tokens``' way)."""
        if m.job.cancel.cancelled or cancel.cancelled:
            _settle(m.job.future, None)
            return
        started = time.perf_counter()
        try:
            built = m.item.build(engine)
            tokens, reuse = (built.tokens, built.stable_len) if isinstance(built, FimPrompt) else (built, 0)
            gen = engine.generate(
                tokens, max_tokens=m.item.max_tokens, stop=m.item.stop, cancel=m.job.cancel, reuse_limit=reuse
            )
        except Exception as err:
            _settle(m.job.future, None, err)
            return
        self._record(gen, (started - m.submitted) * 1000)
        _settle(m.job.future, gen)


def _tokens(built: list[int] | FimPrompt) -> list[int]:
    return list(built.tokens) if isinstance(built, FimPrompt) else list(built)
