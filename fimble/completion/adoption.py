"""The generations running per document, and the requests that wait on one instead of starting anew.

A keystroke that agrees with what the running generation has produced so far joins it (adopts it):
on two cores, cancelling a generation and starting over would throw away the prompt just read.
The joiners are answered when it lands, with its lines so far when it is a block still being
written, or, when it went elsewhere, by a generation of their own (``rerun``, the completer's start).

``Flights`` is one of the completer's parts: it is given the worker (to stop a superseded
generation), the statistics, and the way to start a generation; it never imports the completer.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from fimble.completion.engine import Engine, Generation
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.output.postprocess import whole_lines
from fimble.completion.service import CompletionRequest, CompletionResult, clean_for
from fimble.completion.stats import Stats
from fimble.completion.typeahead import Flight
from fimble.completion.worker import EngineWorker, Job
from fimble.errors import Cancelled

__all__ = ["EARLY_LINES", "Flights", "Rerun"]

EARLY_LINES = "adopted_lines"  # the stop reason of an answer taken from a block still being written

# (request, key, waiter) -> the job of a generation of its own for a request whose flight went elsewhere
Rerun = Callable[[CompletionRequest, str | None, CancelToken], Job[CompletionResult]]


class Flights:
    """One flight per key (a document): the generation under way there and who waits on it."""

    def __init__(self, worker: EngineWorker, stats: Stats, rerun: Rerun) -> None:
        self._worker = worker
        self._stats = stats
        self._rerun = rerun
        self._lock = threading.Lock()
        self._flights: dict[str, Flight] = {}

    def get(self, key: str) -> Flight | None:
        with self._lock:
            return self._flights.get(key)

    def launch(
        self, key: str | None, flight: Flight, submit: Callable[[], Job[Any]], waiter: CancelToken | None
    ) -> Job[Any]:
        """Make ``flight`` the one for ``key`` and queue its job (``submit``), under one lock, so a
        request adopting it finds it registered with its first waiter."""
        with self._lock:
            if key is not None:
                if (old := self._flights.get(key)) is not None:
                    old.dead = True
                self._flights[key] = flight
            job = submit()
            flight.waiters.append(waiter or job.cancel)
        return job

    def take_off(self, flight: Flight) -> None:
        """The flight's job runs on the engine thread: requests may adopt it from now on."""
        with self._lock:
            flight.running = True

    def produced(self, flight: Flight, text: str) -> None:
        """The flight's raw text so far (engine thread): a block answers its adopters line by line."""
        flight.produced = text
        if flight.adopters and flight.multiline:
            self._answer_early(flight, text)

    def under_way(self, key: str, request: CompletionRequest) -> bool:
        """Whether the generation under way for ``key`` answers ``request`` too (the same place, or
        typed since and agreeing with it): a new one would supersede it and the requests waiting on it."""
        prefix, suffix, path = request.prefix, request.suffix, request.path
        with self._lock:
            flight = self._flights.get(key)
            return (
                flight is not None
                and not flight.finished
                and not flight.cancelled
                and (
                    (flight.prefix, flight.suffix, flight.path) == (prefix, suffix, path)
                    or flight.accepts(prefix, suffix, path, request.max_tokens) is not None
                )
            )

    def adopt(self, key: str, request: CompletionRequest) -> Job[CompletionResult] | None:
        """A job answered by the generation running for ``key``, when ``request`` agrees with it."""
        with self._lock:
            flight = self._flights.get(key)
            if flight is None:
                return None
            typed = flight.accepts(request.prefix, request.suffix, request.path, request.max_tokens)
            if typed is None:
                return None
            job: Job[CompletionResult] = Job(_never_run, key)
            flight.waiters.append(job.cancel)
            flight.adopters.append((job, typed, request))
        self._stats.count(adopted=1)
        if flight.multiline:
            self._answer_early(flight, flight.produced)
        return job

    def _answer_early(self, flight: Flight, produced: str) -> None:
        """Answer the requests waiting on a block that is still being written with its lines so far.

        A block takes seconds on two cores, and the keystroke that joins one late (typically the
        first after the cursor went somewhere and ``warm_at`` started there) would wait for its
        end. It gets the finished lines at once; the block goes on for the type-ahead and the cache,
        so typing on, or accepting and asking again, finds the rest without the model."""
        with self._lock:
            waiting = [
                (job, typed, request)
                for job, typed, request in flight.adopters
                if not job.future.done() and not job.cancel.cancelled
            ]
        for job, typed, request in waiting:
            if (early := _early(produced, typed, request, multiline=True)) is None:
                continue
            try:
                job.future.set_result(early)
            except InvalidStateError:  # the generation ended meanwhile and answered it
                continue
            self._stats.answered(request.path, EARLY_LINES)

    def land(self, flight: Flight, result: CompletionResult | None, err: BaseException | None) -> None:
        """The flight ended: answer each request that waited on it from its result, or run it anew."""
        with self._lock:
            flight.finished = True
            if self._flights.get(flight.key) is flight:
                del self._flights[flight.key]
            adopters = list(flight.adopters)
        for i, (job, typed, request) in enumerate(adopters):
            if job.future.done():
                continue
            if err is not None and not isinstance(err, Cancelled):
                job.future.set_exception(err)
            elif flight.dead:
                job.future.set_exception(Cancelled("superseded by a newer request"))
            elif result is not None and result.text.startswith(typed) and (result.text != typed or not typed):
                gen = result.generation
                reason = "cancelled" if gen.stop_reason == "cancelled" else "adopted"
                self._stats.answered(request.path, reason)
                job.future.set_result(
                    CompletionResult(
                        text=result.text[len(typed) :],
                        multiline=result.multiline,
                        generation=Generation(result.text[len(typed) :], (), reason, 0, 0, 0, 0.0, 0.0),
                        parts=result.parts,
                    )
                )
            elif job.cancel.cancelled or i < len(adopters) - 1:
                job.future.set_exception(Cancelled("superseded by a newer request"))
            else:  # the generation went elsewhere: the newest waiter gets a generation of its own
                try:
                    rerun = self._rerun(request, flight.key or None, job.cancel)
                except RuntimeError as closed:
                    job.future.set_exception(Cancelled(str(closed)))
                    continue
                rerun.future.add_done_callback(lambda f, j=job: _transfer(f, j))

    def drop_orphans(self, key: str | None) -> None:
        """Stop the prompt evaluations that run on for nobody in other documents: a request that
        gave up at its deadline lets its prompt be read on (``detach``) for the next keystroke
        there, but once a request for another document comes, the user has moved on, and that
        reading (a cold full prompt: tens of seconds) would keep this one waiting behind it."""
        with self._lock:
            orphans = [
                k
                for k, f in self._flights.items()
                if k != key and f.keep_alive and all(t.cancelled for t in f.waiters)
            ]
        for k in orphans:
            self.supersede(k)

    def supersede(self, key: str) -> None:
        """Stop the model work for ``key``: its answer is no longer wanted."""
        with self._lock:
            if (flight := self._flights.pop(key, None)) is not None:
                flight.dead = True
        self._worker.cancel_key(key)

    def ground_all(self) -> None:
        """Every flight is superseded (the completer stops)."""
        with self._lock:
            for flight in self._flights.values():
                flight.dead = True

    def _answering(self, job: Job[Any]) -> Flight | None:
        """The flight whose generation answers ``job`` (caller holds the lock)."""
        for flight in self._flights.values():
            if any(t is job.cancel for t in flight.waiters):
                return flight
        return None

    def nothing_to_show(self, job: Job[Any]) -> bool:
        """Whether the generation answering ``job`` runs and has nothing to show yet: it is still
        reading its prompt, or its first line is unfinished. A request past its deadline waits on
        for such a one (see ``fimble.server.suggest``): cut now, it would show nothing, and at a
        cold place the first prompt takes most of the deadline before the first token."""
        with self._lock:
            flight = self._answering(job)
            if flight is None:
                return False
            return flight.running and not flight.finished and not whole_lines(flight.produced)

    def lines_so_far(self, job: Job[Any], request: CompletionRequest) -> CompletionResult | None:
        """The finished lines of the block ``job``'s generation is writing, for a caller that takes
        them instead of waiting for the rest, or None (no whole line yet). A one-line request's
        generation goes past its first line while a statement is open (``constructor() {``, a
        call over several lines): that counts as a block here.

        The generation runs on (``keep_alive``): its end fills the type-ahead and the completion
        cache, so accepting a line and asking again, or typing on, finds the rest without the
        model, as for a request that joined the block late (``_answer_early``). Nobody waits for
        it any more, so a request in another document stops it (``drop_orphans``)."""
        with self._lock:
            flight = self._answering(job)
            if flight is None or not flight.running or flight.finished:
                return None
            typed = next((t for j, t, _r in flight.adopters if j is job), "")
            produced = flight.produced
        if (early := _early(produced, typed, request, multiline=flight.multiline)) is None:
            return None
        with self._lock:
            flight.keep_alive = True
        job.cancel.cancel("answered early")
        self._stats.answered(request.path, EARLY_LINES)
        return early

    def detach(self, job: Job[Any]) -> bool:
        """The caller of ``job`` stops waiting (its deadline passed). Returns True when it should
        return nothing at once: the model is still reading the prompt, and that reading runs on
        instead of being aborted. Aborting would drop the batch under way (up to 512 tokens, ~5 s of
        a 1.5B model on two cores), so on a long first prompt each keystroke would start over and
        none would ever be answered; run on, it fills the KV cache, the type-ahead and the
        completion cache, and the next keystroke waits for it (adoption).

        When text was produced and others still wait on the generation, the caller's future gets
        the text so far now (it keeps its whole lines) and the generation goes on for them."""
        with self._lock:
            flight = self._answering(job)
            if flight is None or not flight.running or flight.finished:
                return False
            if not flight.produced:
                flight.keep_alive = True
                job.cancel.cancel("detached")  # nobody waits for this answer any more
                return True
            others = any(t is not job.cancel and not t.cancelled for t in flight.waiters)
            if not (flight.keep_alive or others):
                return False  # the caller's cancel stops the generation within a token
            typed = next((t for j, t, _r in flight.adopters if j is job), "")
            produced = flight.produced
        job.cancel.cancel("deadline")
        text = produced[len(typed) :] if produced.startswith(typed) else ""
        gen = Generation(text, (), "cancelled", 0, 0, 0, 0.0, 0.0)
        with contextlib.suppress(InvalidStateError):  # the generation ended meanwhile
            job.future.set_result(CompletionResult(text, flight.multiline, gen, ()))
        return False


def _early(
    produced: str, typed: str, request: CompletionRequest, *, multiline: bool
) -> CompletionResult | None:
    """The whole lines ``produced`` has past what was ``typed``, cleaned as the final text is (line
    ends, indentation at a line start, overlap), as an answer; None while the first is unfinished."""
    if not produced.startswith(typed) or not (lines := whole_lines(produced[len(typed) :])):
        return None
    if not (text := clean_for(request, lines)):
        return None
    return CompletionResult(text, multiline, Generation(text, (), EARLY_LINES, 0, 0, 0, 0.0, 0.0), ())


def _never_run(_engine: Engine, _cancel: CancelToken) -> CompletionResult:  # pragma: no cover
    """The function of a job answered by another generation (adopted): never queued, never run."""
    raise AssertionError("an adopted job is never run")


def _transfer(src: Future[CompletionResult], job: Job[CompletionResult]) -> None:
    if job.future.done():
        return
    if src.cancelled():
        job.future.set_exception(Cancelled("cancelled"))
    elif (exc := src.exception()) is not None:
        job.future.set_exception(exc)
    else:
        job.future.set_result(src.result())
