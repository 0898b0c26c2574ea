"""A cancel flag shared by a front door (which sets it) and the engine thread (which polls it)."""

from __future__ import annotations

import threading

__all__ = ["CancelToken"]

_pausing = threading.Lock()  # ``pause``/``resume`` against ``cancel``: rare, so one lock for all


class CancelToken:
    """Set once, read often: the engine checks it between tokens and from llama.cpp's abort callback.

    ``background``: the work is for nobody waiting (a prefetch), so a cancel stops even a short
    prompt evaluation, which the engine otherwise finishes (``EngineConfig.abort_min_tokens``). The
    scheduler sets it from the job's kind (``scheduler.ABORTS_SHORT``).

    ``pause``/``resume``: the scheduler stops a job it will run again (``Decision.REQUEUE``); a
    ``cancel`` meanwhile wins, so a caller's cancel is never lost to a requeue.
    """

    __slots__ = ("_event", "_paused", "background", "reason")

    def __init__(self, background: bool = False) -> None:
        self._event = threading.Event()
        self._paused = False
        self.reason = ""
        self.background = background

    def cancel(self, reason: str = "cancelled") -> None:
        if self._event.is_set() and not self._paused:
            return
        with _pausing:
            if not self._event.is_set() or self._paused:
                self._paused = False
                self.reason = reason
                self._event.set()

    def pause(self, reason: str = "requeued") -> None:
        """Stop the work under way for now (the scheduler runs it again: ``resume``)."""
        with _pausing:
            if not self._event.is_set():
                self._paused = True
                self.reason = reason
                self._event.set()

    def resume(self) -> bool:
        """Clear a ``pause``; False when the work was cancelled for good (or never paused)."""
        with _pausing:
            if not self._paused:
                return False
            self._paused = False
            self.reason = ""
            self._event.clear()
            return True

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()
