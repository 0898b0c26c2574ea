"""What the completer counts, and the last request's timeline, behind one small lock.

Its own module so that the completer's parts (flights, work-ahead) count without importing the
completer, and front doors read the counters without reaching into its parts.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from fimble.completion.engine import Generation
from fimble.completion.report import generation_stats

__all__ = ["CompleterStats", "Stats"]

log = logging.getLogger(__name__)


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


class Stats:
    """The live counters and ``last`` (the last request's timeline, for ``fimble.status``).

    Several threads count at once (the event loop answers without the model, the engine thread
    records generations), so every change goes through a method that holds the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = CompleterStats()
        self.last: dict[str, object] = {}

    def snapshot(self) -> CompleterStats:
        with self._lock:
            return CompleterStats(**vars(self._counts))

    def count(self, **added: int) -> None:
        """Add to the named counters, e.g. ``count(requests=1)``."""
        with self._lock:
            for name, n in added.items():
                setattr(self._counts, name, getattr(self._counts, name) + n)

    def answered(self, path: str | None, how: str, where: str = "") -> None:
        """A request answered without the model (typed-through, cached, or from a running generation)."""
        last: dict[str, object] = {"path": path, "stop_reason": how, "tokens_evaluated": 0}
        if where:
            last["cache"] = where
        with self._lock:
            if how == "typed_through":
                self._counts.typed_through += 1
            elif how == "cached":
                self._counts.cache_hits += 1
            self.last = last

    def record(self, gen: Generation, *, queued_ms: float, path: str | None) -> None:
        """A generation for a request ended (finished, cancelled, or a remembered small answer)."""
        with self._lock:
            s = self._counts
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
