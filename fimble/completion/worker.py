"""The one thread that owns the model.

Front doors never touch the engine: they ``submit`` a job and await its future (from asyncio with
``asyncio.wrap_future``). Jobs run one at a time, in order. A job submitted with a ``key`` (a document
URI, an HTTP client) supersedes the pending or running job with the same key: the older one is
cancelled, which stops it between tokens or aborts its prompt evaluation.

The model loads on the worker thread, so a server can answer requests (with nothing) while it loads.

When no job is queued the worker gives the engine's ``warmer`` (``fimble.completion.warmup``) idle
time, one short step at a time; any submitted job cancels the step under way (abort callback).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from fimble.completion.cancel import CancelToken
from fimble.completion.engine import Engine
from fimble.errors import Cancelled, FimbleError

__all__ = ["Busy", "EngineWorker", "Job"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Busy(Protocol):
    """Told when the model starts and stops working, so background work (indexing) can step aside."""

    def enter(self) -> None: ...

    def exit(self) -> None: ...


@dataclass(eq=False)
class Job(Generic[T]):
    fn: Callable[[Engine, CancelToken], T]
    key: str | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    future: Future[T] = field(default_factory=Future)


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
    does not load at all.
    """

    def __init__(
        self,
        load: Callable[[], Engine],
        name: str = "fimble-engine",
        busy: Busy | None = None,
        after: Callable[[], object] | None = None,
    ) -> None:
        self._load = load
        self._after = after
        self._busy = busy
        self._engine: Engine | None = None
        self.load_error: FimbleError | None = None
        self._jobs: deque[Job[Any]] = deque()
        self._running: Job[Any] | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._idle_due = False  # a job finished since the warmer last said it had nothing to do
        self._idle_cancel: CancelToken | None = None
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

    def submit(self, fn: Callable[[Engine, CancelToken], T], key: str | None = None) -> Job[T]:
        job: Job[T] = Job(fn, key)
        with self._cond:
            if self._closed:
                raise RuntimeError("worker is closed")
            if key is not None:
                self._supersede(key)
            self._jobs.append(job)
            if self._idle_cancel is not None:
                self._idle_cancel.cancel("request")
            self._cond.notify()
        return job

    def _supersede(self, key: str) -> None:
        for old in list(self._jobs):
            if old.key == key:
                self._jobs.remove(old)
                old.cancel.cancel("superseded")
                _fail(old, Cancelled("superseded by a newer request"))
        if self._running is not None and self._running.key == key:
            self._running.cancel.cancel("superseded")

    def cancel_key(self, key: str) -> None:
        """Cancel whatever is queued or running for ``key`` (its answer is no longer wanted)."""
        with self._cond:
            self._supersede(key)

    def cancel(self, job: Job[Any]) -> None:
        """Cancel a job: dropped if still queued, stopped at the next token if running."""
        with self._cond:
            job.cancel.cancel()
            if job in self._jobs:
                self._jobs.remove(job)
                _fail(job, Cancelled("cancelled"))

    def _run(self) -> None:
        try:
            if self._after is not None:
                self._after()
            with self._cond:
                stopped = self._closed
            if not stopped:
                self._engine = self._load()
        except FimbleError as err:
            self.load_error = err
            log.error("model failed to load: %s", err)
        except Exception as err:  # a bug or a llama.cpp failure we did not map: keep serving errors
            log.exception("model failed to load")
            self.load_error = FimbleError(f"the model failed to load: {err}; see the log")
        finally:
            # The warmer's first idle step measures this machine's speed (``warmup.Warmer.measure``).
            self._idle_due = getattr(self._engine, "warmer", None) is not None
            self.ready.set()
        while True:
            with self._cond:
                while not self._jobs and not self._closed and not self._idle_due:
                    self._cond.wait()
                if self._closed and not self._jobs:
                    break
                if not self._jobs:
                    self._idle_due = False
                    self._idle_cancel = idle = CancelToken()
                    self._idle_step(idle)
                    continue
                job = self._jobs.popleft()
                self._running = job
            try:
                if not job.future.set_running_or_notify_cancel():
                    continue
                if self.load_error is not None:
                    job.future.set_exception(self.load_error)
                elif job.cancel.cancelled:
                    job.future.set_exception(Cancelled(job.cancel.reason))
                else:
                    assert self._engine is not None
                    job.future.set_result(self._run_job(job))
            except BaseException as err:  # delivered to the waiting front door, never lost
                if not job.future.done():
                    job.future.set_exception(err)
            finally:
                with self._cond:
                    self._running = None
                    self._idle_due = (
                        self._engine is not None and getattr(self._engine, "warmer", None) is not None
                    )
        if self._engine is not None:
            self._engine.close()

    def _idle_step(self, cancel: CancelToken) -> None:
        """Run one step of the warmer with the lock released; it asks for more by returning True."""
        warmer = getattr(self._engine, "warmer", None)
        if warmer is None or self._engine is None:
            return
        self._cond.release()
        more = False
        try:
            if self._busy is not None:
                self._busy.enter()
            try:
                more = bool(warmer.idle(self._engine, cancel))
            finally:
                if self._busy is not None:
                    self._busy.exit()
        except Exception:  # background work must never take the worker down
            log.exception("idle work failed")
        finally:
            self._cond.acquire()
            self._idle_cancel = None
            if more and not cancel.cancelled:
                self._idle_due = True

    def _run_job(self, job: Job[T]) -> T:
        assert self._engine is not None
        if self._busy is None:
            return job.fn(self._engine, job.cancel)
        self._busy.enter()
        try:
            return job.fn(self._engine, job.cancel)
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
