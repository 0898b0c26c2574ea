"""Model work done before anyone asks: the suggestion where the cursor went, and what follows an answer.

Both run as ordinary jobs on the engine worker and only ever fill the type-ahead, the completion
cache and the KV cache, so the next keystroke is answered without the model or with a token or two.
``WorkAhead`` is one of the completer's parts: it is given the worker, the flights, the caches, the
statistics and the way to start a generation; it never imports the completer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fimble.completion.adoption import Flights
from fimble.completion.cache import Cached, CompletionCache
from fimble.completion.engine import Engine
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.output.shape import CursorSyntax
from fimble.completion.service import CompletionRequest, CompletionResult, generate, plan, shape_of
from fimble.completion.stats import Stats
from fimble.completion.typeahead import TypeAhead
from fimble.completion.worker import EngineWorker, Job, JobKind

__all__ = ["CacheKey", "Start", "WorkAhead"]

# (request, its shape) -> its completion cache key, or None while no model is loaded
CacheKey = Callable[[CompletionRequest, CursorSyntax], bytes | None]
# (request, key, shape, cache key, submitted) -> the job of a generation others may adopt
Start = Callable[[CompletionRequest, str | None, CursorSyntax, bytes | None, float], Job[CompletionResult]]


class WorkAhead:
    """Warm-at-focus and prefetch. ``prefetch``: whether accepted suggestions get their continuation."""

    def __init__(
        self,
        worker: EngineWorker,
        flights: Flights,
        stats: Stats,
        typeahead: TypeAhead,
        *,
        cache: Callable[[], CompletionCache],
        cache_key: CacheKey,
        start: Start,
        prefetch: bool = True,
    ) -> None:
        """``cache`` gives the completion cache in use (the server swaps in its shared one)."""
        self._worker = worker
        self._flights = flights
        self._stats = stats
        self._typeahead = typeahead
        self._cache = cache
        self._cache_key = cache_key
        self._start = start
        self.prefetch = prefetch
        self._lock = threading.Lock()
        self.prefetching: Job[Any] | None = None

    def warm_at(self, request: CompletionRequest, key: str) -> bool:
        """Start the suggestion for where the cursor just went (the editor says so when the user
        switches files or moves the cursor), before any keystroke asks for it. Returns whether the
        model was given work.

        A user who arrives somewhere reads before typing; that pause pays for reading the prompt
        there (its head comes back from a saved state, the suffix and middle are evaluated) and
        generating. The first keystroke then finds the suggestion (typed-through or cached), waits
        for the generation under way (adopted), or, typing something else, finds the prompt already
        in the KV cache and costs a token or two. Nothing is done when the answer is already known
        or being generated.
        """
        if self._typeahead.lookup(key, request.prefix, request.suffix) is not None:
            return False
        syntax = shape_of(request)
        cache_key = self._cache_key(request, syntax)
        if cache_key is not None and (found := self._cache().get(cache_key)) is not None:
            cached = found[0]
            self._typeahead.remember(key, request.prefix, request.suffix, cached.text, cached.multiline)
            return False
        if self._flights.under_way(key, request):
            return False
        self._stats.count(warmed=1)
        try:
            self._start(request, key, syntax, cache_key, time.perf_counter())
        except RuntimeError:  # closing
            return False
        return True

    def schedule_prefetch(self, key: str, request: CompletionRequest, result: CompletionResult) -> None:
        """Once idle, generate what follows ``result`` when it is accepted (the next lines), so that
        accepting it, or typing through it, is answered without the model. Any request for the
        model cancels it (``scheduler.RULES``); it only ever fills the type-ahead and the cache."""
        line_rest = request.suffix.split("\n", 1)[0]
        if not self.prefetch or request.multiline is False or not result.text.strip() or line_rest.strip():
            return
        text = request.prefix + result.text
        follow = replace(request, text=text + request.suffix, offset=len(text), multiline=True)
        base = (request.prefix, request.suffix, result.text)

        def run(engine: Engine, cancel: CancelToken) -> None:
            if cancel.cancelled or not self._typeahead.shows(key, *base):
                return
            syntax = shape_of(follow)
            warmer = self._worker.warmer
            more = generate(engine, plan(engine, follow, syntax, warmer=warmer), cancel, warmer=warmer)
            if more.stop_reason == "cancelled":
                return
            self._stats.count(
                prefetched=1,
                tokens_evaluated=more.generation.tokens_evaluated,
                tokens_generated=len(more.generation.tokens),
            )
            if not more.provisional and (cache_key := self._cache_key(follow, syntax)) is not None:
                self._cache().put(cache_key, Cached(more.text, more.multiline))
            self._typeahead.extend(key, *base, more.text)

        with self._lock:
            try:
                self.prefetching = self._worker.submit(run, f"prefetch\0{key}", JobKind.PREFETCH)
            except RuntimeError:  # closing
                self.prefetching = None
