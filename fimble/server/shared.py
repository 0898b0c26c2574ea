"""One ``Completer`` per process, swappable when a client's settings ask for another model.

Every front door in the process (each LSP connection, the HTTP server) holds the same
``SharedCompleter``; it forwards to the current ``Completer``, so a model switch requested by one
editor is seen by all.

A switch stops the old completer at once (its jobs, warm-up and prefetch cancelled) and the new one
loads its model only once the old engine thread has ended: that thread frees the old model after
its KV store's queued writes. So only one llama.cpp engine ever runs, and only one KV store works on
a model's state directory. The overlap this replaces (the new model loading while the old one still
warmed, saved states and freed itself) ran two engines on one directory, and raced the new engine's
set-up against the old one's release inside llama.cpp (how a threads change once killed the server:
see ``engine._install_log_callback``). Requests meanwhile go to the new completer, which answers
nothing until loaded, as on start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fimble.completion.cache import CacheConfig, Cached, CompletionCache
from fimble.completion.completer import BatchItem, Completer, CompleterStats
from fimble.completion.engine import Generation
from fimble.completion.service import CompletionRequest, CompletionResult
from fimble.completion.side_by_side import SideBySide
from fimble.completion.worker import Busy, Job

__all__ = ["SharedCompleter"]

log = logging.getLogger(__name__)

# (model, threads, after): ``after`` runs on the new engine thread before it loads (``Completer``).
Factory = Callable[[str | None, int, Callable[[], object] | None], Completer]
_STOP_WAIT_S = 60.0  # an old engine thread still busy by then is stuck: load anyway, and say so


class SharedCompleter:
    """Forwards the ``Completer`` API to the current completer; ``ensure`` swaps it."""

    def __init__(
        self, model: str | None, threads: int = 0, factory: Factory | None = None, busy: Busy | None = None
    ) -> None:
        self._factory: Factory = factory or (lambda m, t, a: Completer(m, threads=t, busy=busy, after=a))
        self._lock = threading.Lock()
        self._key = (model, threads)
        # One completion cache per process, on disk, shared by every model (keys name the model).
        self.cache = CompletionCache(CacheConfig.from_env())
        self._current = self._adopt_cache(self._factory(model, threads, None))
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
        already stopped, which the caller closes off the event loop (closing joins its thread).
        Never blocks: the new model loads on its own thread once the old engine is gone."""
        with self._lock:
            if (model, threads) == self._key:
                return None
            old = self._current
            old.stop()
            self._key = (model, threads)
            self._current = self._adopt_cache(self._factory(model, threads, lambda: _wait_stopped(old)))
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

    @property
    def side_by_side(self) -> SideBySide:
        return self._current.side_by_side

    def submit_shared(self, item: BatchItem) -> Job[Generation]:
        return self._current.submit_shared(item)

    def submit_batch(self, items: Sequence[BatchItem]) -> Job[list[Generation]]:
        return self._current.submit_batch(items)

    def make_way(self) -> Callable[[], None]:
        return self._current.make_way()

    def detach(self, job: Job[Any]) -> bool:
        return self._current.detach(job)

    def nothing_to_show(self, job: Job[Any]) -> bool:
        return self._current.nothing_to_show(job)

    def lines_so_far(self, job: Job[Any], request: CompletionRequest) -> CompletionResult | None:
        return self._current.lines_so_far(job, request)

    def provisional(self, request: CompletionRequest) -> Cached | None:
        return self._current.provisional(request)

    def cancel(self, job: Job[Any]) -> None:
        """Cancel a job on whichever worker runs it (the current one, or a closing one)."""
        self._current.cancel(job)

    def close(self) -> None:
        self._current.close()
        self.cache.close()


def _wait_stopped(old: Completer) -> None:
    """On the new engine thread, before its model loads: wait for the replaced engine to be freed."""
    if not old.join(_STOP_WAIT_S):
        log.warning(
            "the previous model is still busy after %.0f s; loading the new one alongside it", _STOP_WAIT_S
        )
