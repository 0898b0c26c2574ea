"""One ``Completer`` per process, swappable when a client's settings ask for another model.

Every front door in the process (each LSP connection, the HTTP server) holds the same
``SharedCompleter``; it forwards to the current ``Completer``, so a model switch requested by one
editor is seen by all, and only one model is ever resident once the old one is closed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from fimble.completion.cache import CacheConfig, CompletionCache
from fimble.completion.completer import Completer, CompleterStats
from fimble.completion.service import CompletionRequest, CompletionResult
from fimble.completion.worker import Busy, Job

__all__ = ["SharedCompleter"]

log = logging.getLogger(__name__)

Factory = Callable[[str | None, int], Completer]


class SharedCompleter:
    """Forwards the ``Completer`` API to the current completer; ``ensure`` swaps it."""

    def __init__(
        self, model: str | None, threads: int = 0, factory: Factory | None = None, busy: Busy | None = None
    ) -> None:
        self._factory: Factory = factory or (lambda m, t: Completer(m, threads=t, busy=busy))
        self._lock = threading.Lock()
        self._key = (model, threads)
        # One completion cache per process, on disk, shared by every model (keys name the model).
        self.cache = CompletionCache(CacheConfig.from_env())
        self._current = self._adopt_cache(self._factory(model, threads))
        self.generation = 0  # bumped on each swap, so watchers know to report the new load

    def _adopt_cache(self, completer: Completer) -> Completer:
        completer.cache = self.cache
        return completer

    @property
    def current(self) -> Completer:
        return self._current

    @property
    def model(self) -> str | None:
        return self._key[0]

    @property
    def threads(self) -> int:
        return self._key[1]

    def ensure(self, model: str | None, threads: int) -> Completer | None:
        """Load ``model`` with ``threads`` unless already current; returns the replaced completer,
        which the caller closes off the event loop (closing joins its thread)."""
        with self._lock:
            if (model, threads) == self._key:
                return None
            old = self._current
            self._key = (model, threads)
            self._current = self._adopt_cache(self._factory(model, threads))
            self.generation += 1
        log.info("switching model to %s (threads %s)", model or "default", threads or "auto")
        return old

    # -- the Completer API ----------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._current.ready

    @property
    def loaded(self) -> bool:
        """Whether loading finished, successfully or not."""
        return self._current.worker.ready.is_set()

    @property
    def load_error(self) -> Exception | None:
        return self._current.load_error

    @property
    def last(self) -> dict[str, object]:
        return self._current.last

    @property
    def worker(self) -> Any:
        return self._current.worker

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._current.wait_ready(timeout)

    def stats(self) -> CompleterStats:
        return self._current.stats()

    def answer_now(self, request: CompletionRequest, key: str | None) -> Job[CompletionResult] | None:
        return self._current.answer_now(request, key)

    def submit(self, request: CompletionRequest, key: str | None = None) -> Job[CompletionResult]:
        return self._current.submit(request, key)

    def warm_at(self, request: CompletionRequest, key: str) -> bool:
        return self._current.warm_at(request, key)

    def submit_tokens(self, *args: Any, **kwargs: Any) -> Job[Any]:
        return self._current.submit_tokens(*args, **kwargs)

    def detach(self, job: Job[Any]) -> bool:
        return self._current.detach(job)

    def cancel(self, job: Job[Any]) -> None:
        """Cancel a job on whichever worker runs it (the current one, or a closing one)."""
        self._current.cancel(job)

    def close(self) -> None:
        self._current.close()
        self.cache.close()
