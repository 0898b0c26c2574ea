"""Typing through a suggestion: when the user types the characters the suggestion starts with, the
rest of it is still the answer, and costs no model time at all.

Keyed like the engine's jobs (a document URI), one suggestion per key. Pure string work: a request
matches when its prefix is the remembered prefix plus text the suggestion starts with, and the text
after the cursor is unchanged.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["TypeAhead"]


@dataclass(frozen=True)
class _Shown:
    prefix: str
    suffix: str
    text: str
    multiline: bool


class TypeAhead:
    """The last suggestion per key (bounded LRU over keys)."""

    def __init__(self, max_keys: int = 64) -> None:
        self._shown: OrderedDict[str, _Shown] = OrderedDict()
        self._max = max_keys
        self._lock = threading.Lock()

    def remember(self, key: str, prefix: str, suffix: str, text: str, multiline: bool) -> None:
        if not text:
            return
        with self._lock:
            self._shown[key] = _Shown(prefix, suffix, text, multiline)
            self._shown.move_to_end(key)
            while len(self._shown) > self._max:
                self._shown.popitem(last=False)

    def lookup(self, key: str, prefix: str, suffix: str) -> tuple[str, bool] | None:
        """The rest of the remembered suggestion and its shape, when the user typed into it."""
        with self._lock:
            shown = self._shown.get(key)
        if shown is None or suffix != shown.suffix or len(prefix) <= len(shown.prefix):
            return None
        if not prefix.startswith(shown.prefix):
            return None
        typed = prefix[len(shown.prefix) :]
        if not shown.text.startswith(typed) or len(typed) >= len(shown.text):
            return None
        return shown.text[len(typed) :], shown.multiline

    def forget(self, key: str) -> None:
        with self._lock:
            self._shown.pop(key, None)
