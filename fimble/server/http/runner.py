"""Running a plan on the shared Completer from an HTTP request: admission, waiting, streaming, cancel.

HTTP handlers never touch the model: they submit a plan and await the job's future. Two things keep
a laptop responsive under real clients:

- Admission is bounded (``Gate``): beyond ``max_queue`` generations queued or running, a request is
  refused at once with 429 and ``Retry-After`` instead of piling up behind a single CPU.
- A client that goes away (Continue aborts its fetch on every keystroke, llama.vim kills curl) stops
  its generation at once: a watcher reads the ASGI receive channel, and ``http.disconnect`` cancels
  the job (``fimble.completion.jobs``, as for LSP), whose token the engine checks between tokens and
  inside long prompt evaluations.

A request that will complete makes way as it arrives (``MakeWay``): a prompt list being decoded, or
the idle warm-up, stops while the request is read and its repository context gathered, not only
once its job is submitted; on two cores their decode threads would otherwise take the CPU that work
needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import Request

from fimble.completion.completer import BatchItem, Completer
from fimble.completion.engine import Generation
from fimble.completion.jobs import Awaiting
from fimble.completion.raw_requests import RawPlan
from fimble.completion.worker import Job
from fimble.errors import BackendError, Cancelled, EngineError, FimbleError
from fimble.server.http.body import HttpError

__all__ = ["Finished", "Gate", "MakeWay", "Runner"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# The release of the request's ``Completer.make_way``, set by ``MakeWay`` for the request's task.
_way: ContextVar[Callable[[], None] | None] = ContextVar("fimble_make_way", default=None)


class MakeWay:
    """ASGI middleware: a POST to an endpoint that completes stops batch and idle work on arrival
    (``Completer.make_way``) until its job is submitted (``Runner``) or it ends without one.

    Measured with ``bench/http_batch.py`` (2 cores, a 32-prompt list decoding), a keystroke's time
    outside its own prompt and generation: with the usual scheduler 9.6 ms p50 before and 8.0 after
    (4 ms idle), within noise; at real-time priority (``chrt -r``, whose 100 ms time slices the
    decode threads held while the request was read and its context gathered) 283 ms before, 103 ms
    after. Retrieval heavier than this benchmark's would wait on the batch the same way."""

    def __init__(self, app: Any, completer: Completer, routes: Iterable[str]) -> None:
        self.app = app
        self.completer = completer
        self.routes = frozenset(routes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self.routes:
            await self.app(scope, receive, send)
            return
        release = self.completer.make_way()
        token = _way.set(release)
        try:
            await self.app(scope, receive, send)
        finally:
            _way.reset(token)
            release()


class Gate:
    """A thread-safe count of admitted generations (released from the engine thread)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        return self._active

    def try_enter(self) -> bool:
        with self._lock:
            if self._active >= self.limit:
                return False
            self._active += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._active = max(0, self._active - 1)


@dataclass(frozen=True)
class Finished:
    """A completed generation: the client's text and what it cost."""

    text: str
    generation: Generation
    plan: RawPlan
    queued_ms: float

    @property
    def finish_reason(self) -> str:
        """OpenAI's vocabulary: ``length`` when max_tokens ended it, else ``stop``."""
        return "length" if self.generation.stop_reason in ("max_tokens", "context_full") else "stop"


async def _wait_disconnect(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """Return when the client has gone (the body was already read, so only disconnects arrive)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class Runner:
    """Submits plans to the Completer for HTTP handlers."""

    def __init__(self, completer: Completer, gate: Gate, retry_after_s: int) -> None:
        self.completer = completer
        self.gate = gate
        self.retry_after_s = retry_after_s
        self.on_finished: Callable[[Finished], None] | None = None  # metrics hook

    def check_ready(self) -> None:
        """503 while the model loads (with Retry-After), or with the fix when loading failed."""
        worker = self.completer.worker
        if not worker.ready.is_set():
            raise HttpError(
                503,
                "the model is still loading; retry shortly",
                kind="loading",
                headers={"Retry-After": str(self.retry_after_s)},
            )
        if worker.load_error is not None:
            raise HttpError(503, str(worker.load_error), kind="model_load_error")

    def _submit(self, plan: RawPlan, on_text: Callable[[str], None] | None) -> Job[Generation]:
        if on_text is None:  # other clients' generations may share its steps
            item = BatchItem(plan.build, plan.max_tokens, plan.stop, plan.guide)
            return self._admitted(lambda: self.completer.submit_shared(item))
        return self._admitted(
            lambda: self.completer.submit_tokens(
                plan.build,
                max_tokens=plan.max_tokens,
                stop=plan.stop,
                on_text=on_text,
                guide=plan.guide,
            )
        )

    def _admitted(self, submit: Callable[[], Job[T]]) -> Job[T]:
        """``submit()``'s job once the model is ready and the gate lets one more in (else 503/429);
        the gate's place is given back when the job ends."""
        self.check_ready()
        if not self.gate.try_enter():
            raise HttpError(
                429,
                f"{self.gate.limit} completions are already queued or running; retry shortly",
                kind="rate_limit_exceeded",
                headers={"Retry-After": str(self.retry_after_s)},
            )
        try:
            job = submit()
        except BaseException:
            self.gate.leave()
            raise
        finally:
            if (release := _way.get()) is not None:
                release()  # the job is queued (its own kind now decides what waits), or never will be
        job.future.add_done_callback(lambda _f: self.gate.leave())
        return job

    def _finish(self, plan: RawPlan, gen: Generation, submitted: float) -> Finished:
        queued_ms = max(0.0, (time.perf_counter() - submitted) * 1000 - gen.prompt_ms - gen.generation_ms)
        done = Finished(plan.final(gen.text), gen, plan, queued_ms)
        if self.on_finished is not None:
            with contextlib.suppress(Exception):
                self.on_finished(done)
        return done

    async def run(self, request: Request, plan: RawPlan) -> Finished:
        """Generate to the end; a client disconnect cancels the job (and raises ``Cancelled``)."""
        submitted = time.perf_counter()
        waiting = Awaiting(self._submit(plan, None), self.completer.cancel, reason="request ended")
        gen = await _generation(waiting, gone=_wait_disconnect(request.receive))
        return self._finish(plan, gen, submitted)

    async def run_all(self, request: Request, plans: Sequence[RawPlan]) -> list[Finished]:
        """The plans of a multi-prompt request decoded side by side, in one ``BATCH`` job
        (``Completer.submit_batch``) that the gate admits as one: editors waiting on a keystroke go
        first, and the batch resumes after them with what had finished kept."""
        submitted = time.perf_counter()
        items = [BatchItem(p.build, p.max_tokens, p.stop, p.guide) for p in plans]
        job = self._admitted(lambda: self.completer.submit_batch(items))
        waiting = Awaiting(job, self.completer.cancel, reason="request ended")
        gens = await _generation(waiting, gone=_wait_disconnect(request.receive))
        return [self._finish(plan, gen, submitted) for plan, gen in zip(plans, gens, strict=True)]

    async def stream(self, request: Request, plan: RawPlan) -> AsyncIterator[str | Finished]:
        """Admit the request now (so 429/503 happen before any byte is sent) and return an iterator
        of text deltas ending with the ``Finished`` result."""
        submitted = time.perf_counter()
        loop = asyncio.get_running_loop()
        updates: asyncio.Queue[str | None] = asyncio.Queue()

        def on_text(text: str) -> None:  # engine thread
            loop.call_soon_threadsafe(updates.put_nowait, text)

        waiting = Awaiting(self._submit(plan, on_text), self.completer.cancel, reason="stream closed")
        waiting.when_done(lambda: updates.put_nowait(None))  # after the text the job posted
        deltas = self._deltas(request, plan, waiting, updates, submitted)
        # Wait for the first piece before the response starts: a generation that fails before
        # producing anything (backend down, engine error) is then an HTTP error status, not a 200
        # stream carrying an error event.
        try:
            first: str | Finished | None = await deltas.__anext__()
        except StopAsyncIteration:
            first = None

        async def chain() -> AsyncIterator[str | Finished]:
            if first is None:
                return
            yield first
            async for item in deltas:
                yield item

        return chain()

    async def _deltas(
        self,
        request: Request,
        plan: RawPlan,
        waiting: Awaiting[Generation],
        updates: asyncio.Queue[str | None],
        submitted: float,
    ) -> AsyncIterator[str | Finished]:
        watcher = asyncio.ensure_future(_wait_disconnect(request.receive))
        streamed = ""
        try:
            while True:
                getter = asyncio.ensure_future(updates.get())
                await asyncio.wait({getter, watcher}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    if not waiting.finished:
                        waiting.cancel("client disconnected")
                    return
                text = getter.result()
                if text is None:
                    break
                now = plan.shown(text)
                if len(now) > len(streamed) and now.startswith(streamed):
                    yield now[len(streamed) :]
                    streamed = now
            done = self._finish(plan, await _generation(waiting), submitted)
            if done.text.startswith(streamed):
                if len(done.text) > len(streamed):
                    yield done.text[len(streamed) :]
            else:  # cannot happen by construction of ``shown``; never send a contradiction
                log.warning("final text %r does not extend the streamed %r", done.text, streamed)
            yield done
        finally:
            watcher.cancel()
            if not waiting.finished:
                waiting.cancel("stream closed")


async def _generation(waiting: Awaiting[T], **kwargs: Any) -> T:
    """The generation(s), with engine failures turned into HTTP errors (never a hung connection)."""
    try:
        gen: T = await waiting.result(**kwargs)
    except Cancelled:
        raise
    except BackendError as err:  # the remote inference server: down, slow or failing
        raise HttpError(502, str(err), kind="backend_error") from None
    except EngineError as err:
        raise HttpError(500, str(err), kind="engine_error") from None
    except FimbleError as err:
        raise HttpError(503, str(err), kind="model_load_error") from None
    return gen
