"""Model work done before anyone asks: the suggestion where the cursor went, and what follows an answer.

Both run as ordinary jobs on the engine worker and only ever fill the type-ahead, the completion
cache and the KV cache, so the next keystroke is answered without the model or with a token or two.
A mixin of ``Completer``: it shares the completer's locks, flights, caches and worker.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from fimble.completion.cache import Cached, CompletionCache
from fimble.completion.cancel import CancelToken
from fimble.completion.engine import Engine
from fimble.completion.mixin import CompleterParts
from fimble.completion.service import CompletionRequest, CompletionResult, complete
from fimble.completion.typeahead import TypeAhead
from fimble.completion.worker import EngineWorker, Job, JobKind

__all__ = ["WorkAhead"]


class WorkAhead(CompleterParts):
    """Warm-at-focus and prefetch for ``Completer`` (which provides everything annotated here)."""

    cache: CompletionCache
    prefetch: bool
    worker: EngineWorker
    _typeahead: TypeAhead
    _prefetching: Job[Any] | None

    @property
    def ready(self) -> bool:  # pragma: no cover - Completer's
        raise NotImplementedError

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
        if not self.ready or self._typeahead.lookup(key, request.prefix, request.suffix) is not None:
            return False
        cache_key = self._cache_key(request)
        if cache_key is not None and (found := self.cache.get(cache_key)) is not None:
            cached = found[0]
            self._typeahead.remember(key, request.prefix, request.suffix, cached.text, cached.multiline)
            return False
        prefix, suffix, path = request.prefix, request.suffix, request.path
        with self._lock:
            # The generation under way answers this place too (the same place, or typed since and
            # agreeing with it): a new one would supersede it and the requests waiting on it.
            flight = self._flights.get(key)
            if (
                flight is not None
                and not flight.finished
                and not flight.cancelled
                and (
                    (flight.prefix, flight.suffix, flight.path) == (prefix, suffix, path)
                    or flight.accepts(prefix, suffix, path, request.max_tokens) is not None
                )
            ):
                return False
            self._stats.warmed += 1
        try:
            self._start(request, key, cache_key, time.perf_counter())
        except RuntimeError:  # closing
            return False
        return True

    def _schedule_prefetch(self, key: str, request: CompletionRequest, result: CompletionResult) -> None:
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
            more = complete(engine, follow, cancel, warmer=self.worker.warmer)
            if more.stop_reason == "cancelled":
                return
            with self._lock:
                self._stats.prefetched += 1
                self._stats.tokens_evaluated += more.generation.tokens_evaluated
                self._stats.tokens_generated += len(more.generation.tokens)
            if not more.provisional and (cache_key := self._cache_key(follow)) is not None:
                self.cache.put(cache_key, Cached(more.text, more.multiline))
            self._typeahead.extend(key, *base, more.text)

        with self._lock:
            try:
                self._prefetching = self.worker.submit(run, f"prefetch\0{key}", JobKind.PREFETCH)
            except RuntimeError:  # closing
                self._prefetching = None
