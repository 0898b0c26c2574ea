"""What every front door shares: one engine worker (and, as they arrive, the index and caches).

The LSP server and the HTTP server hold one ``Completer`` each process, so every client gets the same
model, the same KV cache and the same statistics. Methods return ``Job`` objects whose futures the
caller awaits (``asyncio.wrap_future(job.future)``) and whose ``cancel`` token it sets on a client
cancel or disconnect.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fimble.completion.adoption import EARLY_LINES, Adoption
from fimble.completion.ahead import WorkAhead
from fimble.completion.cache import CacheConfig, Cached, CompletionCache, request_key
from fimble.completion.cancel import CancelToken
from fimble.completion.engine import Engine, Generation
from fimble.completion.fim import FimPrompt
from fimble.completion.guide import Guide
from fimble.completion.loading import attach_warmup, load_engine
from fimble.completion.report import generation_stats
from fimble.completion.service import (
    CompletionRequest,
    CompletionResult,
    Plan,
    generate,
    plan,
    result_of,
    wants_multiline,
)
from fimble.completion.typeahead import Flight, FlightCancel, TypeAhead
from fimble.completion.warmup import Warmer
from fimble.completion.worker import Busy, EngineWorker, Job, JobKind

__all__ = ["EARLY_LINES", "Completer", "CompleterStats"]

log = logging.getLogger(__name__)

_SMALL_ANSWERS = 256  # small-prompt answers kept (memory only) for places still cold


@dataclass
class CompleterStats:
    requests: int = 0
    completed: int = 0
    cancelled: int = 0
    failed: int = 0
    tokens_evaluated: int = 0
    tokens_reused: int = 0
    tokens_generated: int = 0
    typed_through: int = 0  # answered from the shown suggestion, without the model
    cache_hits: int = 0  # answered from the completion cache, without the model
    adopted: int = 0  # waited for the generation already running for the document
    prefetched: int = 0  # continuations generated while idle (what follows an accepted suggestion)
    warmed: int = 0  # suggestions started where the cursor went, before a keystroke asked (warm_at)


class Completer(WorkAhead, Adoption):
    """Loads the model in the background and runs completions one at a time, newest first."""

    def __init__(
        self,
        model: str | None = None,
        *,
        threads: int = 0,
        n_ctx: int = 4096,
        load: Callable[[], Engine] | None = None,
        busy: Busy | None = None,
        cache: CompletionCache | None = None,
        prefetch: bool = True,
        after: Callable[[], object] | None = None,
        warmup: Callable[[Engine], Warmer | None] | None = None,
    ) -> None:
        """``after``: called on the engine thread before the model loads; ``warmup``: gives the
        loaded engine's warmer (default: ``attach_warmup`` for a model loaded here) (``EngineWorker``)."""
        self.model = model
        # Memory only unless given one: the server passes its process-wide, disk-backed cache.
        self.cache = cache or CompletionCache(CacheConfig(disk_mb=0))
        self.prefetch = prefetch
        self._model_id: str | None = None
        self._flights: dict[str, Flight] = {}
        # request key -> (small prompt's digest, its answer): provisional answers, in memory only
        self._small: OrderedDict[bytes, tuple[bytes, Cached]] = OrderedDict()
        self._prefetching: Job[Any] | None = None
        self._stats = CompleterStats()
        self._lock = threading.Lock()
        self.last: dict[str, object] = {}  # the last request's timeline, for `fimble.status`
        self._typeahead = TypeAhead()
        self.worker = EngineWorker(
            load or (lambda: load_engine(model, threads=threads, n_ctx=n_ctx)),
            busy=busy,
            after=after,
            warmup=warmup or (None if load else attach_warmup),
        )

    @property
    def ready(self) -> bool:
        return self.worker.ready.is_set() and self.worker.load_error is None

    @property
    def load_error(self) -> Exception | None:
        return self.worker.load_error

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self.worker.ready.wait(timeout) and self.worker.load_error is None

    def stats(self) -> CompleterStats:
        with self._lock:
            return CompleterStats(**vars(self._stats))

    def answer_now(self, request: CompletionRequest, key: str | None) -> Job[CompletionResult] | None:
        """An answer that needs neither the model nor cross-file context (the user typed into the
        shown suggestion), or None. Front doors ask this before fetching context."""
        if key is None or (hit := self._typeahead.lookup(key, request.prefix, request.suffix)) is None:
            return None
        with self._lock:
            self._stats.requests += 1
        self._supersede(key)
        return self._answered(request, hit, "typed_through")

    def submit(self, request: CompletionRequest, key: str | None = None) -> Job[CompletionResult]:
        """Queue a completion; a newer one with the same ``key`` (document, client) cancels this one.

        Answered at once, without the model, when the user has typed the first characters of the
        suggestion last shown for ``key`` (typed-through) or the same request was answered before
        (the completion cache, in memory and on disk). A request typed while the generation for
        ``key`` runs, and agreeing with what it has produced so far, waits for that generation
        instead of cancelling it (adopted).
        """
        if (now := self.answer_now(request, key)) is not None:
            return now
        submitted = time.perf_counter()
        with self._lock:
            self._stats.requests += 1
        cache_key = self._cache_key(request)
        if cache_key is not None and (found := self.cache.get(cache_key)) is not None:
            cached, where = found
            if key is not None:
                self._supersede(key)
                self._typeahead.remember(key, request.prefix, request.suffix, cached.text, cached.multiline)
            return self._answered(request, (cached.text, cached.multiline), "cached", where)
        # An invoked request wants the full prompt: the running generation may be a cold small one.
        if key is not None and not request.full_prompt and (adopted := self._adopt(key, request)) is not None:
            return adopted
        return self._start(request, key, cache_key, submitted)

    def _start(
        self,
        request: CompletionRequest,
        key: str | None,
        cache_key: bytes | None,
        submitted: float,
        waiter: CancelToken | None = None,
    ) -> Job[CompletionResult]:
        """Run ``request`` on the model as a flight others may adopt; ``waiter`` is the cancel token
        of the request it answers when that is not the job's own (a re-run for an adopter)."""
        self._drop_orphans(key)
        flight = Flight(key or "", request.prefix, request.suffix, request.path, request.max_tokens)
        multiline = request.multiline
        flight.multiline = wants_multiline(request.prefix, request.suffix) if multiline is None else multiline
        cancel = FlightCancel(flight)

        def on_text(text: str) -> None:
            flight.produced = text
            if flight.adopters and flight.multiline:
                self._answer_early(flight, text)

        def run(engine: Engine, own: CancelToken) -> CompletionResult:
            started = time.perf_counter()
            with self._lock:
                flight.running = True
            try:
                planned = plan(engine, request, warmer=self.worker.warmer)
                result = self._small_answer(planned, cache_key) or generate(
                    engine, planned, cancel, on_text, warmer=self.worker.warmer
                )
            except BaseException as err:
                self._land(flight, None, err)
                raise
            self._record(result.generation, queued_ms=(started - submitted) * 1000, path=request.path)
            if result.stop_reason != "cancelled":
                # A small first prompt's answer is not cached: once the full prompt is warm, the same
                # request at this place must get the full prompt's answer, not the cold one for good.
                # It is kept for that small prompt only, while the place stays cold.
                keep = cache_key is not None and result.stop_reason != "context_full"
                if keep and not result.provisional:
                    self.cache.put(cache_key, Cached(result.text, result.multiline))
                elif keep and result.stop_reason != "cached":
                    self._remember_small(cache_key, planned.digest, result)
                if key is not None:
                    self._typeahead.remember(
                        key, request.prefix, request.suffix, result.text, result.multiline
                    )
                    self._schedule_prefetch(key, request, result)
            self._land(flight, result, None)
            return result

        with self._lock:
            if key is not None:
                if (old := self._flights.get(key)) is not None:
                    old.dead = True
                self._flights[key] = flight
            job = self.worker.submit(run, key, JobKind.REQUEST if waiter is None else JobKind.ADOPTED)
            flight.waiters.append(waiter or job.cancel)
        return job

    def _small_answer(self, planned: Plan, cache_key: bytes | None) -> CompletionResult | None:
        """The answer already given to exactly this small prompt for this request, or None.

        Where the place is still cold the warmer picks the same small prompt again, and greedy
        decoding would give the same answer (the warming started at a focus, then the keystroke);
        once the full prompt is warm, the plan is the full prompt and the model answers it."""
        if not planned.small or cache_key is None:
            return None
        with self._lock:
            known = self._small.get(cache_key)
        if known is None or known[0] != planned.digest:
            return None
        text = known[1].text
        gen = Generation(text, (), "cached", len(planned.prompt.tokens), 0, 0, 0.0, 0.0)
        return result_of(planned, text, gen)

    def provisional(self, request: CompletionRequest) -> Cached | None:
        """The small first prompt's answer at this request's place, if one was given: what an
        invoked request shows when its full prompt is not read by its deadline. Empty would be
        worse than the answer the user was already shown there; the full prompt reads on."""
        if (cache_key := self._cache_key(request)) is None:
            return None
        with self._lock:
            known = self._small.get(cache_key)
        return known[1] if known is not None else None

    def _remember_small(self, cache_key: bytes, digest: bytes, result: CompletionResult) -> None:
        with self._lock:
            self._small[cache_key] = (digest, Cached(result.text, result.multiline))
            self._small.move_to_end(cache_key)
            while len(self._small) > _SMALL_ANSWERS:
                self._small.popitem(last=False)

    def _drop_orphans(self, key: str | None) -> None:
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
            self._supersede(k)

    def _supersede(self, key: str) -> None:
        """Stop the model work for ``key``: its answer is no longer wanted."""
        with self._lock:
            if (flight := self._flights.pop(key, None)) is not None:
                flight.dead = True
        self.worker.cancel_key(key)

    def _answered(
        self, request: CompletionRequest, hit: tuple[str, bool], how: str, where: str = ""
    ) -> Job[CompletionResult]:
        text, multiline = hit
        gen = Generation(text, (), how, 0, 0, 0, 0.0, 0.0)
        result = CompletionResult(text=text, multiline=multiline, generation=gen, parts=())
        job: Job[CompletionResult] = Job(lambda _e, _c: result)
        job.future.set_result(result)
        with self._lock:
            if how == "typed_through":
                self._stats.typed_through += 1
            else:
                self._stats.cache_hits += 1
            self.last = {"path": request.path, "stop_reason": how, "tokens_evaluated": 0}
            if where:
                self.last["cache"] = where
        return job

    def _cache_key(self, request: CompletionRequest) -> bytes | None:
        """What the suggestion depends on: model, path, text around the cursor, context, budgets."""
        engine = self.worker.engine
        if engine is None:
            return None
        if self._model_id is None:
            path = getattr(engine, "model_path", None)
            try:
                size = Path(path).stat().st_size if path is not None else 0
            except OSError:
                size = 0
            self._model_id = f"{path or self.model or type(engine).__name__}:{size}"
        multiline = request.multiline
        if multiline is None:
            multiline = wants_multiline(request.prefix, request.suffix)
        files = [part for f in request.context_files for part in f[:2]]
        parts = [
            request.path or "",
            multiline,
            request.max_tokens,
            request.prefix_budget,
            request.suffix_budget,
            request.context_budget,
            request.prefix,
            request.suffix,
            len(files),
            *files,
        ]
        return request_key(self._model_id, parts)

    def submit_tokens(
        self,
        prompt: list[int] | Callable[[Engine], list[int] | FimPrompt],
        *,
        max_tokens: int,
        key: str | None = None,
        stop: Callable[[str], tuple[str, int] | None] | None = None,
        on_text: Callable[[str], None] | None = None,
        guide: Guide | None = None,
    ) -> Job[Generation]:
        """Queue a raw generation (HTTP clients that send a ready prompt); ``prompt`` may be built on
        the worker thread from the engine (tokenizer, FIM ids). A built ``FimPrompt`` lets the engine
        move its repository chunks in the KV cache, as for editor requests."""
        submitted = time.perf_counter()

        def run(engine: Engine, cancel: CancelToken) -> Generation:
            started = time.perf_counter()
            built = prompt(engine) if callable(prompt) else prompt
            tokens, reuse_limit = (
                (built.tokens, built.stable_len) if isinstance(built, FimPrompt) else (built, 0)
            )
            gen = engine.generate(
                tokens,
                max_tokens=max_tokens,
                stop=stop,
                cancel=cancel,
                on_text=on_text,
                reuse_limit=reuse_limit,
                guide=guide,
            )
            self._record(gen, queued_ms=(started - submitted) * 1000, path=None)
            return gen

        with self._lock:
            self._stats.requests += 1
        return self.worker.submit(run, key)

    def _record(self, gen: Generation, *, queued_ms: float, path: str | None) -> None:
        with self._lock:
            s = self._stats
            if gen.stop_reason == "cancelled":
                s.cancelled += 1
            elif gen.stop_reason == "cached":  # a small prompt's answer, remembered (no model)
                s.cache_hits += 1
            else:
                s.completed += 1
            s.tokens_evaluated += gen.tokens_evaluated
            s.tokens_reused += gen.tokens_reused
            s.tokens_generated += len(gen.tokens)
            self.last = {"path": path, "queued_ms": round(queued_ms, 1), **generation_stats(gen)}
        log.debug("generation for %s after %.0f ms in the queue: %s", path, queued_ms, self.last)

    def cancel(self, job: Job[Any], reason: str = "cancelled") -> None:
        """Cancel a job for its caller (a generation others wait on goes on until they cancel too)."""
        job.cancel.cancel(reason)
        self.worker.cancel(job)

    def stop(self) -> None:
        """Cancel all model work and let the engine thread free the model; returns at once."""
        with self._lock:
            for flight in self._flights.values():
                flight.dead = True
        self.worker.stop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the engine thread has ended (the model freed) after ``stop``; False on timeout."""
        return self.worker.join(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        self.stop()
        self.join(timeout)
