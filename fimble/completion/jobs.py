"""Awaiting an engine job from asyncio: the one way both front doors (LSP, HTTP) wait, time out and cancel.

A front door submits a job (``Completer.submit``, ``submit_tokens``) and hands it to ``Awaiting``:

- its outcome arrives on the event loop through a loop future of its own, never
  ``asyncio.wrap_future``, whose cancellation would cancel the job's future behind the worker's back
  (and a job others wait on, adopted, must run on for them);
- a wait may time out (``TimeoutError``) and leave the job running, so the caller can decide what to
  do with a job past its deadline and wait again;
- the awaiting task being cancelled (LSP ``$/cancelRequest``, a request handler torn down) cancels
  the job through the caller's ``cancel`` (the completer's: token set, dropped from the queue), and
  so does the client going away (``gone``: HTTP disconnect), which ends the wait with ``Cancelled``.

``run_job`` is the short form: await to the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from fimble.completion.scheduler import Job
from fimble.errors import Cancelled

__all__ = ["Awaiting", "run_job"]

T = TypeVar("T")

# How the front door cancels a job for its caller: ``Completer.cancel`` (token set, dropped from the
# worker's queue; a generation others wait on goes on for them).
Cancel = Callable[[Job[Any]], object]


class Awaiting(Generic[T]):
    """``job``'s outcome on the running event loop; ``reason``: the cancel reason when the awaiting
    task is cancelled."""

    def __init__(self, job: Job[T], cancel: Cancel, *, reason: str = "cancelled") -> None:
        self.job = job
        self._cancel = cancel
        self._reason = reason
        loop = asyncio.get_running_loop()
        self._outcome: asyncio.Future[T] = loop.create_future()
        # Nobody awaits the outcome once the request was cancelled or detached; mark it as seen, or
        # asyncio logs "Future exception was never retrieved" on every superseded keystroke.
        self._outcome.add_done_callback(lambda f: f.cancelled() or f.exception())

        def arrived(src: Future[T]) -> None:  # on the engine thread (or here, when already done)
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(self._transfer, src)

        job.future.add_done_callback(arrived)

    def _transfer(self, src: Future[T]) -> None:
        if self._outcome.done():
            return
        if src.cancelled():
            self._outcome.set_exception(Cancelled("cancelled"))
        elif (exc := src.exception()) is not None:
            self._outcome.set_exception(exc)
        else:
            self._outcome.set_result(src.result())

    @property
    def finished(self) -> bool:
        """Whether the job has its outcome (it may not have reached the event loop yet)."""
        return self.job.future.done()

    def when_done(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` on the event loop once the outcome has arrived there (after everything
        the job posted to the loop before it ended, e.g. streamed text)."""
        self._outcome.add_done_callback(lambda _f: callback())

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the job for this caller: its token (with ``reason``) and the front door's cancel."""
        self.job.cancel.cancel(reason)
        self._cancel(self.job)

    async def result(self, timeout: float | None = None, *, gone: Awaitable[object] | None = None) -> T:
        """The job's result (or its exception). After ``timeout`` seconds ``TimeoutError``, and the
        job runs on. ``gone`` finishing first (the client disconnected) cancels the job and raises
        ``Cancelled``; the awaiting task cancelled cancels the job and re-raises."""
        try:
            if gone is None:
                return await asyncio.wait_for(asyncio.shield(self._outcome), timeout)
            watcher = asyncio.ensure_future(gone)
            try:
                await asyncio.wait(
                    {self._outcome, watcher}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                watcher.cancel()
            if not self._outcome.done():
                if not watcher.done() or watcher.cancelled():
                    raise TimeoutError
                self.cancel("client disconnected")
                raise Cancelled("the client disconnected")
            return self._outcome.result()
        except asyncio.CancelledError:
            self.cancel(self._reason)  # $/cancelRequest, a handler torn down: stop within one token
            raise


async def run_job(
    job: Job[T], cancel: Cancel, *, gone: Awaitable[object] | None = None, reason: str = "cancelled"
) -> T:
    """Await ``job`` to the end (see ``Awaiting``)."""
    return await Awaiting(job, cancel, reason=reason).result(gone=gone)
