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

A client typing on keeps the ordinary path. A generation whose prompt the interactive slot's KV
cache mostly holds (at most half of it left to read: the client's previous keystroke was there) runs
alone, first, where that cache is reused; in a batch slot it would read its whole prompt again. A
group that starts with one other member runs it alone too, unless that member arrived while another
generation was under way that was answered or still runs: two clients asking in turn, whose next
requests are a few milliseconds behind and will join this batch. A generation that was cancelled
does not count: llama.vim drops its last request as it sends the next one, so the two overlap for a
moment, and a cold jump must refresh the interactive slot for the keystrokes that follow.
"""

from __future__ import annotations

import contextlib
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

__all__ = ["SideBySide"]

Record = Callable[["Generation", float], None]  # a finished generation and its queued ms (stats)


def _never(engine: Engine, cancel: CancelToken) -> Generation:
    raise AssertionError("a member's job runs inside its group's")  # pragma: no cover


@dataclass(eq=False)
class _Member:
    item: BatchItem
    job: Job[Generation]
    submitted: float
    built: list[int] | FimPrompt | None = None  # its prompt, built once on the engine thread
    beside: tuple[Job[Generation], ...] = ()  # the generations under way when it arrived


@dataclass(eq=False)
class _Group:
    members: list[_Member] = field(default_factory=list)
    taken: int = 0  # members handed to the engine so far
    open: bool = True  # newcomers may still join
    moved: set[_Member] = field(default_factory=set)  # gone to the next group (``_again``)

    def staying(self) -> list[_Member]:
        return [m for m in self.members if m not in self.moved]


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
        self._flying: list[_Member] = []
        self.groups = 0  # groups run as a batch (for tests)
        self.generations = 0  # generations decoded in such a group (``/metrics``)

    @property
    def in_flight(self) -> int:
        """Generations submitted here and not finished."""
        return len(self._flying)

    def submit(self, item: BatchItem) -> Job[Generation]:
        """Queue a generation (no streamed text) for its caller."""
        job: Job[Generation] = Job(_never, None, cancel=token_for(JobKind.REQUEST), kind=JobKind.REQUEST)
        member = _Member(item, job, time.perf_counter())
        others = self._worker.queued()  # asked before our lock: the worker's is never taken inside it
        with self._lock:
            member.beside = tuple(m.job for m in self._flying)
            self._flying.append(member)
            job.future.add_done_callback(lambda _f: self._left(member))
            running = self._running
            if running is not None and others:  # another job waits: the running group takes no more
                running.open = False
                self._running = running = None
            joined = running if running is not None and running.open else self._queued
            if joined is not None:
                joined.members.append(member)
                return job
            group = self._queued = _Group([member])
        self._submit_group(group)
        return job

    def _submit_group(self, group: _Group) -> None:
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

    def _again(self, member: _Member) -> None:
        """Queue ``member`` in the next group (it arrived warm while a batch ran: see ``_run``)."""
        with self._lock:
            if self._queued is not None:
                self._queued.members.append(member)
                return
            group = self._queued = _Group([member])
        self._submit_group(group)

    def _left(self, member: _Member) -> None:
        with self._lock:
            self._flying.remove(member)

    def _orphaned(self, group: _Group, future: Future[object]) -> None:
        with self._lock:
            group.open = False
            if self._queued is group:
                self._queued = None
            if self._running is group:
                self._running = None
        err = None if future.cancelled() else future.exception()
        for m in group.staying():
            _settle(m.job.future, None, err or Cancelled("shutdown"))

    # -- on the engine thread -------------------------------------------------------------------

    def _run(self, group: _Group, engine: Engine, cancel: CancelToken) -> None:
        batches = bool(getattr(engine, "batch_slots", None))  # a remote backend has none
        with self._lock:
            if self._queued is group:
                self._queued = None
            first = list(group.members)
        for m in first if batches else ():
            if self._warm(engine, m):
                self._alone(engine, m, cancel)
        with self._lock:
            wanted = [m for m in group.members if not m.job.cancel.cancelled and not m.job.future.done()]
            overlapped = any(_wanted(j) for m in wanted for j in m.beside)
            together = batches and bool(wanted) and (len(wanted) > 1 or overlapped)
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
                for m in [m for m in new if self._warm(engine, m)]:
                    new.remove(m)
                    group.moved.add(m)
                    self._again(m)  # the ordinary path, next: the batch takes no newcomer now
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
            for m in group.staying():
                _settle(m.job.future, None)

    def _built(self, engine: Engine, m: _Member) -> list[int] | FimPrompt | None:
        """``m``'s prompt (built once), or None when it cannot be built (its caller told)."""
        if m.built is None:
            try:
                m.built = m.item.build(engine)
            except Exception as err:
                _settle(m.job.future, None, err)
        return m.built

    def _warm(self, engine: Engine, m: _Member) -> bool:
        """The interactive slot's cache (or a saved state) holds at least half of ``m``'s prompt."""
        cost = getattr(engine, "evaluation_cost", None)
        if cost is None or m.job.cancel.cancelled or m.job.future.done():
            return False
        built = self._built(engine, m)
        if built is None:
            return False
        tokens, reuse = (built.tokens, built.stable_len) if isinstance(built, FimPrompt) else (built, 0)
        return 2 * cost(tokens, reuse) <= len(tokens)

    def _arrival(self, engine: Engine, m: _Member, order: list[_Member]) -> Arrival | None:
        """A member's prompt for the batch, or None when it is gone or cannot run (its caller told)."""
        if m.job.cancel.cancelled or m.job.future.done():
            _settle(m.job.future, None)
            return None
        built = self._built(engine, m)
        if built is None:
            return None
        try:
            tokens = _tokens(built)
            check_fits([tokens], engine.n_ctx)
        except Exception as err:
            _settle(m.job.future, None, err)
            return None
        order.append(m)
        self.generations += 1
        return Arrival(tokens, m.item.max_tokens, m.item.stop, m.job.cancel, m.item.guide)

    def _alone(self, engine: Engine, m: _Member, cancel: CancelToken) -> None:
        """A member as an ordinary generation (``Completer.submit_tokens``' way)."""
        if m.job.future.done():
            return
        if m.job.cancel.cancelled or cancel.cancelled:
            _settle(m.job.future, None)
            return
        started = time.perf_counter()
        built = self._built(engine, m)
        if built is None:
            return
        try:
            tokens, reuse = (built.tokens, built.stable_len) if isinstance(built, FimPrompt) else (built, 0)
            gen = engine.generate(
                tokens,
                max_tokens=m.item.max_tokens,
                stop=m.item.stop,
                cancel=m.job.cancel,
                reuse_limit=reuse,
                guide=m.item.guide,
            )
        except Exception as err:
            _settle(m.job.future, None, err)
            return
        self._record(gen, (started - m.submitted) * 1000)
        _settle(m.job.future, gen)


def _wanted(job: Job[Generation]) -> bool:
    """``job`` was answered, or runs and is not cancelled: its client is still there."""
    if not job.future.done():
        return not job.cancel.cancelled
    return not job.future.cancelled() and job.future.exception() is None


def _tokens(built: list[int] | FimPrompt) -> list[int]:
    return list(built.tokens) if isinstance(built, FimPrompt) else list(built)
