"""What every front door shares: one engine worker (and, as they arrive, the index and caches).

The LSP server and the HTTP server hold one ``Completer`` each process, so every client gets the same
model, the same KV cache and the same statistics. Methods return ``Job`` objects that the front doors
await through ``fimble.completion.jobs`` (which cancels the job when the client cancels or leaves).
The parts it is made of: ``Flights`` (generations others may adopt), ``WorkAhead`` (warm-at-focus,
prefetch), ``TypeAhead``, ``SmallAnswers`` and ``Stats``; the order of the work is the scheduler's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fimble.completion.adoption import EARLY_LINES, Flights
from fimble.completion.ahead import WorkAhead
from fimble.completion.cache import CacheConfig, Cached, CompletionCache, answer_code_id, request_key
from fimble.completion.engine import Engine, Generation
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.guide import Guide
from fimble.completion.engine.loading import load_engine
from fimble.completion.output.shape import CursorSyntax
from fimble.completion.prompt.fim import FimPrompt
from fimble.completion.service import (
    CompletionRequest,
    CompletionResult,
    Plan,
    generate,
    plan,
    result_of,
    shape_of,
)
from fimble.completion.side_by_side import SideBySide
from fimble.completion.small import SmallAnswers
from fimble.completion.stats import CompleterStats, Stats
from fimble.completion.typeahead import Flight, FlightCancel, TypeAhead
from fimble.completion.warmup import Warmer, attach_warmup
from fimble.completion.worker import Busy, EngineWorker, Job, JobKind
from fimble.errors import Cancelled

__all__ = ["EARLY_LINES", "BatchItem", "Completer", "CompleterStats"]


# KV sequences of a loaded model for ``submit_batch`` (a list of prompts over HTTP), beside the
# interactive slot. The KV buffer is unified, so they cost no memory, and the batch gets only the cells
# the interactive slot leaves free (short prompts: a few dozen). 32: on the 2-core AVX2 machine
# measured, a decode step gains nothing under 16 rows and 1.8x at 32 (bench/results/batch_curve_avx2.json:
# 17, 16, 21, 29 tokens/s at 1, 4, 16, 32). A keystroke does not wait for the step: batch work is
# aborted inside it.
BATCH_SLOTS = 32


@dataclass(frozen=True)
class BatchItem:
    """One generation of ``Completer.submit_batch``: its prompt, built on the engine thread (as
    ``submit_tokens``' callable), its stop rules, length and import guide."""

    build: Callable[[Engine], list[int] | FimPrompt]
    max_tokens: int
    stop: Callable[[str], tuple[str, int] | None] | None = None
    guide: Guide | None = None


def _tokens(built: list[int] | FimPrompt) -> list[int]:
    return list(built.tokens) if isinstance(built, FimPrompt) else built


class Completer:
    """Loads the model in the background and runs completions one at a time, newest first.

    Built from parts, each given what it works with: ``stats`` (counters and the last timeline),
    ``typeahead`` (the suggestion shown per document), ``flights`` (the generation running per
    document, and the requests adopting it), ``ahead`` (warm-at-focus and prefetch) and the small
    first prompts' answers. What the completer itself does is the order: typed-through, cache,
    adoption, then a generation of its own.

    It holds no client's settings: several clients share it, so each request carries its client's
    (budgets, ``multiline``, ``tuning``: see ``fimble.completion.tuning``, which also says what
    stays process-wide: the model, its threads, the KV state store).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        threads: int = 0,
        n_ctx: int = 4096,
        batch_slots: int = BATCH_SLOTS,
        load: Callable[[], Engine] | None = None,
        busy: Busy | None = None,
        cache: CompletionCache | None = None,
        prefetch: bool = True,
        after: Callable[[], object] | None = None,
        warmup: Callable[[Engine], Warmer | None] | None = None,
    ) -> None:
        """``after``: called on the engine thread before the model loads; ``warmup``: gives the
        loaded engine's warmer (default: ``attach_warmup`` for a model loaded here) (``EngineWorker``)."""
        self.model = model
        # Memory only unless given one: the server passes its process-wide, disk-backed cache.
        self.cache = cache or CompletionCache(CacheConfig(disk_mb=0))
        self._model_id: str | None = None
        self.worker = EngineWorker(
            load or (lambda: load_engine(model, threads=threads, n_ctx=n_ctx, batch_slots=batch_slots)),
            busy=busy,
            after=after,
            warmup=warmup or (None if load else attach_warmup),
        )
        self._stats = Stats()
        self._typeahead = TypeAhead()
        self._small = SmallAnswers()
        self.flights = Flights(self.worker, self._stats, self._rerun)
        self.side_by_side = SideBySide(
            self.worker, lambda gen, queued_ms: self._stats.record(gen, queued_ms=queued_ms, path=None)
        )
        self.ahead = WorkAhead(
            self.worker,
            self.flights,
            self._stats,
            self._typeahead,
            cache=lambda: self.cache,
            cache_key=self._cache_key,
            start=self._start,
            prefetch=prefetch,
        )

    @property
    def prefetch(self) -> bool:
        return self.ahead.prefetch

    @prefetch.setter
    def prefetch(self, on: bool) -> None:
        self.ahead.prefetch = on

    @property
    def last(self) -> dict[str, object]:
        """The last request's timeline, for ``fimble.status``."""
        return self._stats.last

    @property
    def ready(self) -> bool:
        return self.worker.ready.is_set() and self.worker.load_error is None

    @property
    def load_error(self) -> Exception | None:
        return self.worker.load_error

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self.worker.ready.wait(timeout) and self.worker.load_error is None

    def stats(self) -> CompleterStats:
        return self._stats.snapshot()

    def answer_now(self, request: CompletionRequest, key: str | None) -> Job[CompletionResult] | None:
        """An answer that needs neither the model nor cross-file context (the user typed into the
        shown suggestion), or None. Front doors ask this before fetching context."""
        if key is None:
            return None
        hit = self._typeahead.lookup(key, request.prefix, request.suffix, full_prompt=request.full_prompt)
        if hit is None:
            return None
        self._stats.count(requests=1)
        self.flights.supersede(key)
        return self._answered(request, hit, "typed_through")

    def submit(self, request: CompletionRequest, key: str | None = None) -> Job[CompletionResult]:
        """Queue a completion; a newer one with the same ``key`` (document, client) cancels this one.

        Answered at once, without the model, when the user has typed the first characters of the
        suggestion last shown for ``key`` (typed-through) or the same request was answered before
        (the completion cache, in memory and on disk). A request typed while the generation for
        ``key`` runs, and agreeing with what it has produced so far, waits for that generation
        instead of cancelling it (adopted).

        One line or a block is decided here, once (``shape_of``), and that decision keys the
        cache, shapes the generation others adopt and shapes the result.
        """
        if (now := self.answer_now(request, key)) is not None:
            return now
        submitted = time.perf_counter()
        self._stats.count(requests=1)
        syntax = shape_of(request)
        cache_key = self._cache_key(request, syntax)
        if cache_key is not None and (found := self.cache.get(cache_key)) is not None:
            cached, where = found
            if key is not None:
                self.flights.supersede(key)
                self._typeahead.remember(key, request.prefix, request.suffix, cached.text, cached.multiline)
            return self._answered(request, (cached.text, cached.multiline), "cached", where)
        # An invoked request wants the full prompt: the running generation may be a cold small one.
        adopted = None if key is None or request.full_prompt else self.flights.adopt(key, request)
        if adopted is not None:
            return adopted
        return self._start(request, key, syntax, cache_key, submitted)

    def warm_at(self, request: CompletionRequest, key: str) -> bool:
        """Start the suggestion where the cursor just went, before a keystroke asks for it
        (``WorkAhead.warm_at``); returns whether the model was given work."""
        return self.ready and self.ahead.warm_at(request, key)

    def _rerun(
        self, request: CompletionRequest, key: str | None, waiter: CancelToken
    ) -> Job[CompletionResult]:
        """A generation of its own for a request whose adopted flight went elsewhere."""
        syntax = shape_of(request)
        cache_key = self._cache_key(request, syntax)
        return self._start(request, key, syntax, cache_key, time.perf_counter(), waiter)

    def _start(
        self,
        request: CompletionRequest,
        key: str | None,
        syntax: CursorSyntax,
        cache_key: bytes | None,
        submitted: float,
        waiter: CancelToken | None = None,
    ) -> Job[CompletionResult]:
        """Run ``request`` on the model as a flight others may adopt; ``waiter`` is the cancel token
        of the request it answers when that is not the job's own (a re-run for an adopter)."""
        self.flights.drop_orphans(key)
        flight = Flight(key or "", request.prefix, request.suffix, request.path, request.max_tokens)
        flight.multiline = syntax.multiline
        cancel = FlightCancel(flight)

        def on_text(text: str) -> None:
            self.flights.produced(flight, text)

        def run(engine: Engine, own: CancelToken) -> CompletionResult:
            started = time.perf_counter()
            self.flights.take_off(flight)
            try:
                planned = plan(engine, request, syntax, warmer=self.worker.warmer)
                result = self._small_answer(planned, cache_key) or generate(
                    engine, planned, cancel, on_text, warmer=self.worker.warmer
                )
            except BaseException as err:
                self.flights.land(flight, None, err)
                raise
            self._stats.record(result.generation, queued_ms=(started - submitted) * 1000, path=request.path)
            if result.stop_reason != "cancelled":
                # A small first prompt's answer is not cached: once the full prompt is warm, the same
                # request at this place must get the full prompt's answer, not the cold one for good.
                # It is kept for that small prompt only, while the place stays cold.
                keep = cache_key is not None and result.stop_reason != "context_full"
                if keep and not result.provisional:
                    self.cache.put(cache_key, Cached(result.text, result.multiline))
                elif keep and result.stop_reason != "cached":
                    self._small.remember(cache_key, planned.digest, Cached(result.text, result.multiline))
                if key is not None:
                    self._typeahead.remember(
                        key,
                        request.prefix,
                        request.suffix,
                        result.text,
                        result.multiline,
                        provisional=result.provisional,
                    )
                    self.ahead.schedule_prefetch(key, request, result)
            self.flights.land(flight, result, None)
            return result

        kind = JobKind.REQUEST if waiter is None else JobKind.ADOPTED
        return self.flights.launch(key, flight, lambda: self.worker.submit(run, key, kind), waiter)

    def _small_answer(self, planned: Plan, cache_key: bytes | None) -> CompletionResult | None:
        """The answer already given to exactly this small prompt for this request, or None.

        Where the place is still cold the warmer picks the same small prompt again, and greedy
        decoding would give the same answer (the warming started at a focus, then the keystroke);
        once the full prompt is warm, the plan is the full prompt and the model answers it."""
        if not planned.small or cache_key is None:
            return None
        if (known := self._small.get(cache_key, planned.digest)) is None:
            return None
        gen = Generation(known.text, (), "cached", len(planned.prompt.tokens), 0, 0, 0.0, 0.0)
        return result_of(planned, known.text, gen)

    def provisional(self, request: CompletionRequest) -> Cached | None:
        """The small first prompt's answer at this request's place, if one was given: what an
        invoked request shows when its full prompt is not read by its deadline. Empty would be
        worse than the answer the user was already shown there; the full prompt reads on."""
        if (cache_key := self._cache_key(request, shape_of(request))) is None:
            return None
        return self._small.latest(cache_key)

    def _answered(
        self, request: CompletionRequest, hit: tuple[str, bool], how: str, where: str = ""
    ) -> Job[CompletionResult]:
        text, multiline = hit
        gen = Generation(text, (), how, 0, 0, 0, 0.0, 0.0)
        result = CompletionResult(text=text, multiline=multiline, generation=gen, parts=())
        job: Job[CompletionResult] = Job(lambda _e, _c: result)
        job.future.set_result(result)
        self._stats.answered(request.path, how, where)
        return job

    def _cache_key(self, request: CompletionRequest, syntax: CursorSyntax) -> bytes | None:
        """What the suggestion depends on: model, path, text around the cursor, context, budgets,
        and the request's shape as decided (``shape_of``)."""
        engine = self.worker.engine
        if engine is None:
            return None
        if self._model_id is None:
            path = getattr(engine, "model_path", None)
            try:
                size = Path(path).stat().st_size if path is not None else 0
            except OSError:
                size = 0
            self._model_id = f"{path or self.model or type(engine).__name__}:{size}:{answer_code_id()}"
        files = [part for f in request.context_files for part in f[:2]]
        parts = [
            request.path or "",
            syntax.multiline,
            request.max_tokens,
            request.prefix_budget,
            request.suffix_budget,
            request.context_budget,
            request.prefix,
            request.suffix,
            len(files),
            *files,
        ]
        return request_key(self._model_id, parts)

    def nothing_to_show(self, job: Job[Any]) -> bool:
        """Whether the generation answering ``job`` has nothing to show yet (``Flights``)."""
        return self.flights.nothing_to_show(job)

    def lines_so_far(self, job: Job[Any], request: CompletionRequest) -> CompletionResult | None:
        """The finished lines of the block ``job``'s generation is writing (``Flights.lines_so_far``)."""
        return self.flights.lines_so_far(job, request)

    def detach(self, job: Job[Any]) -> bool:
        """The caller of ``job`` stops waiting at its deadline (``Flights.detach``)."""
        return self.flights.detach(job)

    def submit_tokens(
        self,
        prompt: list[int] | Callable[[Engine], list[int] | FimPrompt],
        *,
        max_tokens: int,
        key: str | None = None,
        stop: Callable[[str], tuple[str, int] | None] | None = None,
        on_text: Callable[[str], None] | None = None,
        guide: Guide | None = None,
        kind: JobKind = JobKind.REQUEST,
    ) -> Job[Generation]:
        """Queue a raw generation (HTTP clients that send a ready prompt); ``prompt`` may be built on
        the worker thread from the engine (tokenizer, FIM ids). A built ``FimPrompt`` lets the engine
        move its repository chunks in the KV cache, as for editor requests. ``kind`` is ``BATCH`` for
        the items of a multi-prompt request, so an editor's keystroke goes first."""
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
                guide=guide,
            )
            self._stats.record(gen, queued_ms=(started - submitted) * 1000, path=None)
            return gen

        self._stats.count(requests=1)
        return self.worker.submit(run, key, kind)

    def submit_shared(self, item: BatchItem) -> Job[Generation]:
        """Queue a raw generation that may decode side by side with other clients' (no streamed
        text): ``fimble.completion.side_by_side``. Alone, it is ``submit_tokens``."""
        self._stats.count(requests=1)
        return self.side_by_side.submit(item)

    def submit_batch(self, items: Sequence[BatchItem]) -> Job[list[Generation]]:
        """Queue several raw generations as one ``BATCH`` job that decodes them side by side
        (``Engine.generate_batch``: one pass over the weights per step for all of them, shared
        prompt heads evaluated once), one ``Generation`` per item, in order.

        An editor's request stops the job between two tokens and it runs again later
        (``Decision.REQUEUE``): what had finished is kept, the rest starts again, each with a fresh
        import guide (a guide keeps state through its generation). On an engine without batch
        slots (a remote backend) the items are generated one after another in the same job. The batch
        never takes the interactive slot's cells while it can run narrower (``keep_interactive``),
        so the next keystroke still finds its prompt in the KV cache."""
        submitted = time.perf_counter()
        done: dict[int, Generation] = {}

        def run(engine: Engine, cancel: CancelToken) -> list[Generation]:
            started = time.perf_counter()
            built = {i: _tokens(item.build(engine)) for i, item in enumerate(items) if i not in done}
            batches = bool(getattr(engine, "batch_slots", None))  # a remote backend has none
            together = list(built) if batches else []
            guides = {i: None if items[i].guide is None else items[i].guide.fresh() for i in built}

            def finished(k: int, gen: Generation) -> None:
                if gen.stop_reason != "cancelled":
                    done[together[k]] = gen
                    self._stats.record(gen, queued_ms=(started - submitted) * 1000, path=None)

            if together:
                engine.generate_batch(
                    [built[i] for i in together],
                    max_tokens=max(items[i].max_tokens for i in together),
                    stops=[items[i].stop for i in together],
                    limits=[items[i].max_tokens for i in together],
                    cancel=cancel,
                    on_done=finished,
                    keep_interactive=True,
                    guides=[guides[i] for i in together],
                )
            for i in built:
                if i in done or i in together:
                    continue
                item = items[i]
                gen = engine.generate(
                    built[i], max_tokens=item.max_tokens, stop=item.stop, cancel=cancel, guide=guides[i]
                )
                if gen.stop_reason == "cancelled":
                    break
                done[i] = gen
                self._stats.record(gen, queued_ms=(started - submitted) * 1000, path=None)
            if len(done) < len(items):
                raise Cancelled(cancel.reason or "cancelled")
            return [done[i] for i in range(len(items))]

        self._stats.count(requests=len(items))
        return self.worker.submit(run, None, JobKind.BATCH)

    def make_way(self) -> Callable[[], None]:
        """A request is being prepared off the engine thread: stop batch and idle work now rather
        than at its submission (``EngineWorker.make_way``); call the release once it is submitted."""
        return self.worker.make_way(JobKind.REQUEST)

    def cancel(self, job: Job[Any], reason: str = "cancelled") -> None:
        """Cancel a job for its caller (a generation others wait on goes on until they cancel too)."""
        job.cancel.cancel(reason)
        self.worker.cancel(job)

    def stop(self) -> None:
        """Cancel all model work and let the engine thread free the model; returns at once."""
        self.flights.ground_all()
        self.worker.stop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the engine thread has ended (the model freed) after ``stop``; False on timeout."""
        return self.worker.join(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        self.stop()
        self.join(timeout)
