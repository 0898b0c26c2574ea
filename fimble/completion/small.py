"""Answers given from a small first prompt (a cold place), kept in memory for that prompt only.

A small prompt's answer is not the answer at its place for good (the completion cache): once the
full prompt is warm, the same request must get the full prompt's answer. But while the place stays
cold the warmer picks the same small prompt again, and greedy decoding would give the same answer,
so it is kept per request key with the small prompt's digest (see ``Completer``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from fimble.completion.cache import Cached

__all__ = ["SmallAnswers"]


class SmallAnswers:
    """request key -> (small prompt's digest, its answer), a bounded LRU."""

    def __init__(self, max_entries: int = 256) -> None:
        self._entries: OrderedDict[bytes, tuple[bytes, Cached]] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()

    def get(self, cache_key: bytes, digest: bytes) -> Cached | None:
        """The answer given to exactly this small prompt (``digest``) for this request, or None."""
        with self._lock:
            known = self._entries.get(cache_key)
        return known[1] if known is not None and known[0] == digest else None

    def latest(self, cache_key: bytes) -> Cached | None:
        """The answer given at this request's place from whichever small prompt answered it last."""
        with self._lock:
            known = self._entries.get(cache_key)
        return known[1] if known is not None else None

    def remember(self, cache_key: bytes, digest: bytes, answer: Cached) -> None:
        with self._lock:
            self._entries[cache_key] = (digest, answer)
            self._entries.move_to_end(cache_key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
