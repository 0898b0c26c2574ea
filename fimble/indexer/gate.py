"""The pause switch between completions and background indexing.

The completion side wraps each request in ``with gate.busy():``; the indexer calls ``wait_idle()``
between files and never starts a file or a write transaction while a completion runs (work already
handed to a pool process finishes, niced). ``pause()``/``resume()`` hold indexing off explicitly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Gate"]


class Gate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = 0
        self._paused = False

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Mark a completion in flight (nestable, thread-safe)."""
        self.enter()
        try:
            yield
        finally:
            self.exit()

    def enter(self) -> None:
        with self._cond:
            self._busy += 1

    def exit(self) -> None:
        with self._cond:
            self._busy = max(0, self._busy - 1)
            self._cond.notify_all()

    def pause(self) -> None:
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def idle(self) -> bool:
        return not self._busy and not self._paused

    def wait_idle(self, stop: threading.Event | None = None, poll: float = 0.05) -> bool:
        """Block until no completion runs and indexing is not paused; False if ``stop`` got set."""
        with self._cond:
            while self._busy or self._paused:
                if stop is not None and stop.is_set():
                    return False
                self._cond.wait(poll)
        return stop is None or not stop.is_set()
