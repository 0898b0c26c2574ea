"""Requests that wait on a generation already running for their document instead of starting anew.

A keystroke that agrees with what the running generation has produced so far joins it (adopts it):
on two cores, cancelling a generation and starting over would throw away the prompt just read.
The joiners are answered when it lands, with its lines so far when it is a block still being
written, or, when it went elsewhere, by a generation of their own. A mixin of ``Completer``: it
shares the completer's lock, flights, statistics and worker.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any

from fimble.completion.cancel import CancelToken
from fimble.completion.engine import Engine, Generation
from fimble.completion.mixin import CompleterParts
from fimble.completion.postprocess import whole_lines
from fimble.completion.service import CompletionRequest, CompletionResult, clean_for
from fimble.completion.typeahead import Flight
from fimble.completion.worker import Job
from fimble.errors import Cancelled

__all__ = ["EARLY_LINES", "Adoption"]

EARLY_LINES = "adopted_lines"  # the stop reason of an answer taken from a block still being written


class Adoption(CompleterParts):
    """Adopting running generations, for ``Completer`` (which provides everything annotated here)."""

    last: dict[str, object]

    def _adopt(self, key: str, request: CompletionRequest) -> Job[CompletionResult] | None:
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
            self._stats.adopted += 1
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
            if not produced.startswith(typed) or not (lines := whole_lines(produced[len(typed) :])):
                continue
            # Raw lines: cleaned as the final text is (line ends, indentation at a line start, overlap).
            if not (text := clean_for(request, lines)):
                continue
            gen = Generation(text, (), EARLY_LINES, 0, 0, 0, 0.0, 0.0)
            try:
                job.future.set_result(CompletionResult(text, True, gen, ()))
            except InvalidStateError:  # the generation ended meanwhile and answered it
                continue
            with self._lock:
                self.last = {"path": request.path, "stop_reason": EARLY_LINES, "tokens_evaluated": 0}

    def _land(self, flight: Flight, result: CompletionResult | None, err: BaseException | None) -> None:
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
                with self._lock:
                    self.last = {"path": request.path, "stop_reason": reason, "tokens_evaluated": 0}
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
                    rerun = self._start(
                        request,
                        flight.key or None,
                        self._cache_key(request),
                        time.perf_counter(),
                        waiter=job.cancel,
                    )
                except RuntimeError as closed:
                    job.future.set_exception(Cancelled(str(closed)))
                    continue
                rerun.future.add_done_callback(lambda f, j=job: _transfer(f, j))

    def reading_prompt(self, job: Job[Any]) -> bool:
        """Whether the generation answering ``job`` is running and still reading its prompt (it has
        produced nothing yet). A request past its deadline waits on for such a one when its prompt
        is bounded (see ``fimble.server.suggest``): giving up would show nothing at a cold place."""
        with self._lock:
            for flight in self._flights.values():
                if any(t is job.cancel for t in flight.waiters):
                    return flight.running and not flight.finished and not flight.produced
        return False

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
            for flight in self._flights.values():
                if any(t is job.cancel for t in flight.waiters):
                    break
            else:
                return False
            if not flight.running or flight.finished:
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
