"""Typing ahead of the model: answers that follow from a suggestion already shown or being generated.

- ``TypeAhead``: when the user types the characters the shown suggestion starts with, the rest of it
  is still the answer, and costs no model time at all. A prefetched continuation (what follows the
  suggestion once accepted, see ``Completer``) extends it: after accepting, the next line is shown.
- ``Flight``: a generation in progress for a document. When the user types while it runs and what they
  typed agrees with what it has produced so far, the new request waits for it instead of starting
  over (``consistent``); the generation stops only when every request waiting on it is cancelled.

Keyed like the engine's jobs (a document URI), one suggestion per key. Pure string work: a request
matches when its prefix is the remembered prefix plus text the suggestion starts with, and the text
after the cursor is unchanged.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from fimble.completion.engine.cancel import CancelToken

__all__ = ["Flight", "FlightCancel", "TypeAhead"]


@dataclass(frozen=True)
class _Shown:
    prefix: str
    suffix: str
    text: str
    multiline: bool
    more: str = ""  # prefetched: what follows ``text`` once it is accepted
    provisional: bool = False  # from a small first prompt at a cold place


class TypeAhead:
    """The last suggestion per key (bounded LRU over keys)."""

    def __init__(self, max_keys: int = 64) -> None:
        self._shown: OrderedDict[str, _Shown] = OrderedDict()
        self._max = max_keys
        self._lock = threading.Lock()

    def remember(
        self, key: str, prefix: str, suffix: str, text: str, multiline: bool, *, provisional: bool = False
    ) -> None:
        """``provisional``: the suggestion is a small first prompt's (see ``lookup``)."""
        if not text:
            return
        with self._lock:
            self._shown[key] = _Shown(prefix, suffix, text, multiline, provisional=provisional)
            self._shown.move_to_end(key)
            while len(self._shown) > self._max:
                self._shown.popitem(last=False)

    def shows(self, key: str, prefix: str, suffix: str, text: str) -> bool:
        """Whether ``text`` at (prefix, suffix) is still the suggestion remembered for ``key``."""
        with self._lock:
            shown = self._shown.get(key)
        return shown is not None and (shown.prefix, shown.suffix, shown.text) == (prefix, suffix, text)

    def extend(self, key: str, prefix: str, suffix: str, text: str, more: str) -> bool:
        """Attach a prefetched continuation to the suggestion, if it is still the one shown."""
        if not more:
            return False
        with self._lock:
            shown = self._shown.get(key)
            if shown is None or (shown.prefix, shown.suffix, shown.text) != (prefix, suffix, text):
                return False
            self._shown[key] = _Shown(prefix, suffix, text, shown.multiline, more, shown.provisional)
        return True

    def lookup(
        self, key: str, prefix: str, suffix: str, *, full_prompt: bool = False
    ) -> tuple[str, bool] | None:
        """The rest of the remembered suggestion and its shape, when the user typed into it.

        Within the suggestion, the rest of it; once all of it is typed or accepted, the prefetched
        continuation (multi-line: it is the next lines). ``full_prompt`` (an invoked request: the
        user asked, and waits for the full prompt) passes over a provisional suggestion, a cold small
        prompt's: typing into it must not stand in for the answer the user asked for, as the
        completion cache never holds one (``Completer.submit``); an automatic request keeps it, so
        the suggestion does not change under the user's typing.
        """
        with self._lock:
            shown = self._shown.get(key)
        if shown is None or suffix != shown.suffix or len(prefix) <= len(shown.prefix):
            return None
        if full_prompt and shown.provisional:
            return None
        if not prefix.startswith(shown.prefix):
            return None
        typed = prefix[len(shown.prefix) :]
        if len(typed) < len(shown.text):
            return (shown.text[len(typed) :], shown.multiline) if shown.text.startswith(typed) else None
        whole = shown.text + shown.more
        if not whole.startswith(typed) or len(typed) >= len(whole):
            return None
        return whole[len(typed) :], True

    def forget(self, key: str) -> None:
        with self._lock:
            self._shown.pop(key, None)


def consistent(typed: str, produced: str) -> bool:
    """Whether a generation that has produced ``produced`` may still yield text starting with ``typed``."""
    return produced.startswith(typed) or typed.startswith(produced)


@dataclass(eq=False)
class Flight:
    """A generation running for one key, and the requests waiting on it.

    ``waiters`` are the cancel tokens of those requests: the first one's own, then one per adopter.
    The generation is cancelled when the flight is superseded (``dead``) or all of them are.
    """

    key: str
    prefix: str
    suffix: str
    path: str | None
    max_tokens: int
    waiters: list[CancelToken] = field(default_factory=list)
    adopters: list[tuple[Any, str, Any]] = field(default_factory=list)  # (job, typed, request)
    produced: str = ""  # raw text generated so far (engine thread writes, others read)
    running: bool = False
    finished: bool = False
    dead: bool = False
    multiline: bool = False  # the shape of its answer (for a caller that takes its text so far)
    keep_alive: bool = False  # a caller stopped waiting mid-prompt: only a supersede stops it now

    @property
    def cancelled(self) -> bool:
        return self.dead or (not self.keep_alive and all(t.cancelled for t in self.waiters))

    def accepts(self, prefix: str, suffix: str, path: str | None, max_tokens: int) -> str | None:
        """What the user typed since this flight's prefix, if a request there can wait for it."""
        if not self.running or self.finished or self.cancelled:
            return None
        if (suffix, path, max_tokens) != (self.suffix, self.path, self.max_tokens):
            return None
        if len(prefix) < len(self.prefix) or not prefix.startswith(self.prefix):
            return None
        typed = prefix[len(self.prefix) :]
        return typed if consistent(typed, self.produced) else None


class FlightCancel(CancelToken):
    """The cancel token the engine polls for a flight: set when the flight is cancelled."""

    __slots__ = ("_flight",)

    def __init__(self, flight: Flight) -> None:
        super().__init__()
        self._flight = flight

    @property
    def cancelled(self) -> bool:
        if self._flight.cancelled:
            if not self.reason:
                live = [t.reason for t in self._flight.waiters if t.reason]
                self.reason = "superseded" if self._flight.dead else (live[-1] if live else "cancelled")
            return True
        return False
