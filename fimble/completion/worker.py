"""The one thread that owns the model.

Front doors never touch the engine: they ``submit`` a job and await its future (from asyncio through
``fimble.completion.jobs``). Jobs run one at a time, the most urgent kind first and in order within a
kind; what a new job does to the work under way (supersede by key, pre-empt a prefetch, stop the
idle step, let indexing step aside) is ``fimble.completion.scheduler``'s table, applied here.

The model loads on the worker thread, so a server can answer requests (with nothing) while it loads.

When no job of a more urgent kind is queued the worker gives its ``warmer``
(``fimble.completion.warmup``) idle time, one short step at a time (``JobKind.WARMUP``).

A front door prepares a job off this thread before submitting it (reads the request, gathers its
repository context). While it does, ``make_way`` already stops what that job would stop: on two
cores a batch's decode threads otherwise take the CPU the preparation needs, and the keystroke waits
for the scheduler to give it a turn (``fimble.server.http.runner.MakeWay`` has the figures).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from fimble.completion.engine import Engine
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.scheduler import Decision, Job, JobKind, JobQueue, decide, supersedes, token_for
from fimble.errors import Cancelled, FimbleError

if TYPE_CHECKING:
    from fimble.completion.warmup import Warmer

__all__ = ["Busy", "EngineWorker", "Job", "JobKind"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_IDLE: Literal["idle"] = "idle"  # ``EngineWorker._next``: the warmer's idle step


class Busy(Protocol):
    """Told when the model starts and stops working, so background work (indexing) can step aside
    (``JobKind.INDEX`` in the scheduler's table)."""

    def enter(self) -> None: ...

    def exit(self) -> None: ...


def _fail(job: Job[Any], err: BaseException) -> None:
    """Fail a queued job unless its future is already done (``asyncio.wrap_future`` cancels it when the
    awaiting task is cancelled, and a done future refuses a second outcome)."""
    if not job.future.done():
        job.future.set_exception(err)


class EngineWorker:
    """Runs jobs against an engine on a dedicated thread.

    ``load`` is called on that thread the first time; a load failure is kept and re-raised to every
    job (``load_error``) so the server stays up and can tell the user what to do. ``after`` is called
    on that thread before ``load``: a model switch passes the replaced worker's ``join``, so two
    engines never run at once (nor two KV stores on one state directory); a worker stopped by then
    does not load at all. ``warmup`` is called on that thread with the loaded engine and gives the
    worker its ``warmer`` (``warmup.attach_warmup``: small first prompts, idle warm-up), which the
    jobs pass to ``fimble.completion.service``; None: no warmer.
    """

    def __init__(
        self,
        load: Callable[[], Engine],
        name: str = "fimble-engine",
        busy: Busy | None = None,
        after: Callable[[], object] | None = None,
        warmup: Callable[[Engine], Warmer | None] | None = None,
    ) -> None:
        self._load = load
        self._after = after
        self._warmup = warmup
        self._busy = busy
        self._engine: Engine | None = None
        self.warmer: Warmer | None = None
        self.load_error: FimbleError | None = None
        self._jobs = JobQueue()
        self._running: Job[Any] | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._idle_due = False  # a job finished since the warmer last said it had nothing to do
        self._idle_cancel: CancelToken | None = None
        self._coming: list[JobKind] = []  # jobs being prepared (``make_way``)
        self.ready = threading.Event()  # set once the model loaded (or failed to)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def engine(self) -> Engine | None:
        """The loaded engine, for read-only facts (model path, FIM family); never call it from here."""
        return self._engine

    @property
    def busy(self) -> bool:
        """Whether a job is running or queued; background work (indexing) yields while it is."""
        with self._cond:
            return self._running is not None or bool(self._jobs)

    def submit(
        self, fn: Callable[[Engine, CancelToken], T], key: str | None = None, kind: JobKind = JobKind.REQUEST
    ) -> Job[T]:
        """Queue ``fn`` as a job of ``kind``, applying the scheduler's rules to the work under way."""
        job: Job[T] = Job(fn, key, cancel=token_for(kind), kind=kind)
        with self._cond:
            if self._closed:
                raise RuntimeError("worker is closed")
            self._admit(job)
            self._jobs.push(job)
            self._cond.notify()
        return job

    def make_way(self, kind: JobKind = JobKind.REQUEST) -> Callable[[], None]:
        """A job of ``kind`` is being prepared and will be submitted soon: the work it would stop
        and run again later (``Decision.REQUEUE``: a batch, the idle step, indexing) stops now, and
        none of it starts or resumes until the returned release is called (idempotent; call it once
        the job is submitted, or when the preparation ends without one). Pre-emptions wait for the
        submission itself: a prefetch may be the very answer the job adopts."""
        with self._cond:
            self._coming.append(kind)
            running = self._running
            if running is not None and decide(running.kind, kind) is Decision.REQUEUE:
                running.cancel.pause()
            if self._idle_cancel is not None and decide(JobKind.WARMUP, kind) is Decision.REQUEUE:
                self._idle_cancel.cancel("request")
        released = False

        def release() -> None:
            nonlocal released
            with self._cond:
                if not released:
                    released = True
                    self._coming.remove(kind)
                    # An idle step stopped for a request that never came asks again.
                    self._idle_due = self._idle_due or self._warmer_ready()
                    self._cond.notify()

        return release

    def _held(self, kind: JobKind) -> bool:
        """Whether work of ``kind`` waits for a job being prepared (``make_way``)."""
        return any(decide(kind, coming) is Decision.REQUEUE for coming in self._coming)

    def _admit(self, new: Job[Any]) -> None:
        """What ``new`` does to the queued, running and idle work (``scheduler.RULES``)."""
        for old in self._jobs:
            if supersedes(new.key, old.key):
                self._drop(old, "superseded", "superseded by a newer request")
            elif decide(old.kind, new.kind) is Decision.PREEMPT:
                self._drop(old, "pre-empted", f"pre-empted by a {new.kind.name.lower()} job")
        running = self._running
        if running is not None:
            if supersedes(new.key, running.key):
                running.cancel.cancel("superseded")
            else:
                decision = decide(running.kind, new.kind)
                if decision is Decision.PREEMPT:
                    running.cancel.cancel("pre-empted")
                elif decision is Decision.REQUEUE:
                    running.cancel.pause()
        if self._idle_cancel is not None and decide(JobKind.WARMUP, new.kind) is not Decision.AFTER:
            self._idle_cancel.cancel("request")

    def _drop(self, job: Job[Any], reason: str, message: str) -> None:
        self._jobs.remove(job)
        job.cancel.cancel(reason)
        _fail(job, Cancelled(message))

    def _supersede(self, key: str) -> None:
        for old in self._jobs:
            if old.key == key:
                self._drop(old, "superseded", "superseded by a newer request")
        if self._running is not None and self._running.key == key:
            self._running.cancel.cancel("superseded")

    def queued(self) -> bool:
        """Whether a job waits in the queue (a side-by-side group stops growing: ``side_by_side``)."""
        with self._cond:
            return self._jobs.peek() is not None

    def cancel_key(self, key: str) -> None:
        """Cancel whatever is queued or running for ``key`` (its answer is no longer wanted)."""
        with self._cond:
            self._supersede(key)

    def cancel(self, job: Job[Any]) -> None:
        """Cancel a job: dropped if still queued, stopped at the next token if running."""
        with self._cond:
            job.cancel.cancel()
            if self._jobs.remove(job):
                _fail(job, Cancelled("cancelled"))

    def _run(self) -> None:
        try:
            if self._after is not None:
                self._after()
            with self._cond:
                stopped = self._closed
            if not stopped:
                self._engine = self._load()
                if self._warmup is not None:
                    self.warmer = self._warmup(self._engine)
        except FimbleError as err:
            self.load_error = err
            log.error("model failed to load: %s", err)
        except Exception as err:  # a bug or a llama.cpp failure we did not map: keep serving errors
            log.exception("model failed to load")
            self.load_error = FimbleError(f"the model failed to load: {err}; see the log")
        finally:
            # The warmer's first idle step measures this machine's speed (``warmup.Warmer.measure``).
            self._idle_due = self._warmer_ready()
            self.ready.set()
        while True:
            with self._cond:
                while (upcoming := self._next()) is None and not self._closed:
                    self._cond.wait()
                if upcoming is None:  # closed, nothing queued
                    break
                if upcoming is _IDLE:
                    self._idle_due = False
                    self._idle_cancel = idle = CancelToken()
                    self._idle_step(idle)
                    continue
                job = self._jobs.pop()
                self._running = job
            try:
                # A requeued job's future is running already.
                if not job.future.running() and not job.future.set_running_or_notify_cancel():
                    continue
                if self.load_error is not None:
                    job.future.set_exception(self.load_error)
                elif job.cancel.cancelled:
                    job.future.set_exception(Cancelled(job.cancel.reason))
                else:
                    assert self._engine is not None
                    result = self._run_job(job)
                    if not self._requeued(job):
                        job.future.set_result(result)
            except BaseException as err:  # delivered to the waiting front door, never lost
                if not self._requeued(job) and not job.future.done():
                    job.future.set_exception(err)
            finally:
                with self._cond:
                    self._running = None
                    self._idle_due = self._warmer_ready()
        if self._engine is not None:
            self._engine.close()

    def _next(self) -> Job[Any] | Literal["idle"] | None:
        """What runs next: the most urgent queued job, or the idle step when it is due and that job
        waits for the warmer (or none is queued); None: nothing yet. Work a job being prepared
        holds back (``make_way``) counts as not queued; once closed, queued jobs run regardless."""
        top = self._jobs.peek()
        if self._closed:
            return top
        if top is not None and self._held(top.kind):
            top = None
        if self._idle_due and not self._held(JobKind.WARMUP) and (top is None or top.kind > JobKind.WARMUP):
            return _IDLE
        return top

    def _warmer_ready(self) -> bool:
        return self._engine is not None and self.warmer is not None

    def _requeued(self, job: Job[Any]) -> bool:
        """Put a job stopped by a more urgent one (``Decision.REQUEUE``) back in the queue, its
        outcome so far dropped; False when it was not stopped so, or was cancelled meanwhile."""
        with self._cond:
            if self._closed or not job.cancel.resume():
                return False
            self._jobs.push(job)
            return True

    def _idle_step(self, cancel: CancelToken) -> None:
        """Run one step of the warmer with the lock released; it asks for more by returning True."""
        warmer = self.warmer
        if warmer is None or self._engine is None:
            return
        self._cond.release()
        more = False
        try:
            with self._stepping_aside(JobKind.WARMUP):
                more = bool(warmer.idle(self._engine, cancel))
        except Exception:  # background work must never take the worker down
            log.exception("idle work failed")
        finally:
            self._cond.acquire()
            self._idle_cancel = None
            if more and not cancel.cancelled:
                self._idle_due = True

    def _run_job(self, job: Job[T]) -> T:
        assert self._engine is not None
        with self._stepping_aside(job.kind):
            return job.fn(self._engine, job.cancel)

    @contextlib.contextmanager
    def _stepping_aside(self, kind: JobKind) -> Iterator[None]:
        """Indexing steps aside while the model does work of ``kind`` (``Busy`` enter/exit)."""
        if self._busy is None or decide(JobKind.INDEX, kind) is Decision.AFTER:
            yield
            return
        self._busy.enter()
        try:
            yield
        finally:
            self._busy.exit()

    def close(self, timeout: float | None = 10.0) -> None:
        self.stop()
        self.join(timeout)

    def stop(self) -> None:
        """Cancel queued, running and idle work and let the thread end; returns at once. The thread
        frees the engine (after its KV store's queued writes) as its last act."""
        with self._cond:
            self._closed = True
            for job in self._jobs:
                job.cancel.cancel("shutdown")
            if self._running is not None:
                self._running.cancel.cancel("shutdown")
            if self._idle_cancel is not None:
                self._idle_cancel.cancel("shutdown")
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread (and so the engine's release) after ``stop``; False on timeout."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
