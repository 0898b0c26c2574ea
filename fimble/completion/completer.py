"""What every front door shares: one engine worker (and, as they arrive, the index and caches).

The LSP server and the HTTP server hold one ``Completer`` each process, so every client gets the same
model, the same KV cache and the same statistics. Methods return ``Job`` objects whose futures the
caller awaits (``asyncio.wrap_future(job.future)``) and whose ``cancel`` token it sets on a client
cancel or disconnect.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from fimble.completion.cancel import CancelToken
from fimble.completion.engine import Engine, Generation
from fimble.completion.fim import FimPrompt
from fimble.completion.loading import load_engine
from fimble.completion.service import CompletionRequest, CompletionResult, complete
from fimble.completion.typeahead import TypeAhead
from fimble.completion.worker import Busy, EngineWorker, Job

__all__ = ["Completer", "CompleterStats"]


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


class Completer:
    """Loads the model in the background and runs completions one at a time, newest first."""

    def __init__(
        self,
        model: str | None = None,
        *,
        threads: int = 0,
        n_ctx: int = 4096,
        load: Callable[[], Engine] | None = None,
        busy: Busy | None = None,
    ) -> None:
        self.model = model
        self._stats = CompleterStats()
        self._lock = threading.Lock()
        self.last: dict[str, object] = {}  # the last request's timeline, for `fimble.status`
        self._typeahead = TypeAhead()
        self.worker = EngineWorker(
            load or (lambda: load_engine(model, threads=threads, n_ctx=n_ctx)), busy=busy
        )

    @property
    def ready(self) -> bool:
        return self.worker.ready.is_set() and self.worker.load_error is None

    @property
    def load_error(self) -> Exception | None:
        return self.worker.load_error

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self.worker.ready.wait(timeout) and self.worker.load_error is None

    def stats(self) -> CompleterStats:
        with self._lock:
            return CompleterStats(**vars(self._stats))

    def submit(self, request: CompletionRequest, key: str | None = None) -> Job[CompletionResult]:
        """Queue a completion; a newer one with the same ``key`` (document, client) cancels this one.

        When the user has typed the first characters of the suggestion last shown for ``key``, the
        rest of it is answered at once, without the model (the job's future is already done).
        """
        submitted = time.perf_counter()
        with self._lock:
            self._stats.requests += 1
        if key is not None and (hit := self._typeahead.lookup(key, request.prefix, request.suffix)):
            self.worker.cancel_key(key)
            return self._typed_through(key, hit, request)

        def run(engine: Engine, cancel: CancelToken) -> CompletionResult:
            started = time.perf_counter()
            result = complete(engine, request, cancel)
            self._record(result.generation, queued_ms=(started - submitted) * 1000, path=request.path)
            if key is not None and result.stop_reason != "cancelled":
                self._typeahead.remember(key, request.prefix, request.suffix, result.text, result.multiline)
            return result

        return self.worker.submit(run, key)

    def _typed_through(
        self, key: str, hit: tuple[str, bool], request: CompletionRequest
    ) -> Job[CompletionResult]:
        text, multiline = hit
        gen = Generation(text, (), "typed_through", 0, 0, 0, 0.0, 0.0)
        job: Job[CompletionResult] = Job(lambda _e, _c: result, key)
        result = CompletionResult(text=text, multiline=multiline, generation=gen, parts=())
        job.future.set_result(result)
        with self._lock:
            self._stats.typed_through += 1
            self.last = {"path": request.path, "stop_reason": "typed_through", "tokens_evaluated": 0}
        return job

    def submit_tokens(
        self,
        prompt: list[int] | Callable[[Engine], list[int] | FimPrompt],
        *,
        max_tokens: int,
        key: str | None = None,
        stop: Callable[[str], tuple[str, int] | None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Job[Generation]:
        """Queue a raw generation (HTTP clients that send a ready prompt); ``prompt`` may be built on
        the worker thread from the engine (tokenizer, FIM ids). A built ``FimPrompt`` lets the engine
        move its repository chunks in the KV cache, as for editor requests."""
        submitted = time.perf_counter()

        def run(engine: Engine, cancel: CancelToken) -> Generation:
            started = time.perf_counter()
            built = prompt(engine) if callable(prompt) else prompt
            tokens, reuse_limit = (
                (built.tokens, built.stable_len) if isinstance(built, FimPrompt) else (built, 0)
            )
            gen = engine.generate(
                tokens,
                max_tokens=max_tokens,
                stop=stop,
                cancel=cancel,
                on_text=on_text,
                reuse_limit=reuse_limit,
            )
            self._record(gen, queued_ms=(started - submitted) * 1000, path=None)
            return gen

        with self._lock:
            self._stats.requests += 1
        return self.worker.submit(run, key)

    def _record(self, gen: Generation, *, queued_ms: float, path: str | None) -> None:
        with self._lock:
            s = self._stats
            if gen.stop_reason == "cancelled":
                s.cancelled += 1
            else:
                s.completed += 1
            s.tokens_evaluated += gen.tokens_evaluated
            s.tokens_reused += gen.tokens_reused
            s.tokens_generated += len(gen.tokens)
            self.last = {
                "path": path,
                "queued_ms": round(queued_ms, 1),
                "prompt_ms": round(gen.prompt_ms, 1),
                "generation_ms": round(gen.generation_ms, 1),
                "prompt_tokens": gen.prompt_tokens,
                "tokens_evaluated": gen.tokens_evaluated,
                "tokens_reused": gen.tokens_reused,
                "tokens_generated": len(gen.tokens),
                "stop_reason": gen.stop_reason,
            }

    def close(self) -> None:
        self.worker.close()
