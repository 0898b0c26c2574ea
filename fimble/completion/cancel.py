"""A cancel flag shared by a front door (which sets it) and the engine thread (which polls it)."""

from __future__ import annotations

import threading

__all__ = ["CancelToken"]


class CancelToken:
    """Set once, read often: the engine checks it between tokens and from llama.cpp's abort callback.

    ``background``: the work is for nobody waiting (a prefetch), so a cancel stops even a short
    prompt evaluation, which the engine otherwise finishes (``EngineConfig.abort_min_tokens``).
    """

    __slots__ = ("_event", "background", "reason")

    def __init__(self, background: bool = False) -> None:
        self._event = threading.Event()
        self.reason = ""
        self.background = background

    def cancel(self, reason: str = "cancelled") -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()
