"""Independent clients' generations decoded side by side (issue #22) without a model: overlapping
generations share one batch, a late one joins the running batch, a lone one keeps the ordinary path
(the interactive slot's KV reuse), a client that leaves stops only its own, and the group stops
growing once another job waits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from fimble.completion.completer import BatchItem
from fimble.completion.engine.batch import Feed, decode_batch
from fimble.completion.engine.slot import Slot
from fimble.completion.side_by_side import SideBySide
from fimble.completion.worker import EngineWorker
from fimble.errors import Cancelled
from tests.fakes import FakeDecoder, FakeKV, RunnerUpGuide, hold_worker


class BatchEngine:
    """``generate`` and ``generate_batch`` over the fake decoder; ``on_feed`` runs at each feed call."""

    n_ctx = 4096

    def __init__(self) -> None:
        kv = FakeKV()
        self.decoder = FakeDecoder(kv)
        self.batch_slots = [Slot(kv, 2 + i) for i in range(4)]
        self.batches = 0
        self.alone: list[list[int]] = []
        self.on_feed: Any = None
        self.warm: set[int] = set()  # prompts beginning with these the interactive slot holds

    def evaluation_cost(self, tokens: list[int], reuse_limit: int) -> int:
        return 4 if tokens[0] in self.warm else len(tokens)

    def generate_batch(self, prompts: Sequence[Sequence[int]], *, feed: Feed, **kw: Any) -> Any:
        self.batches += 1
        kw.pop("keep_interactive")

        def watched(last: bool) -> Any:
            if self.on_feed is not None:
                self.on_feed(last)
            return feed(last)

        return decode_batch(self.decoder, self.batch_slots, prompts, max_tokens=64, feed=watched, **kw)  # type: ignore[arg-type]

    def generate(
        self, tokens: list[int], *, max_tokens: int, stop: Any, cancel: Any, reuse_limit: int, guide: Any
    ) -> Any:
        self.alone.append(tokens)
        [gen] = decode_batch(
            self.decoder,
            self.batch_slots[:1],  # type: ignore[arg-type]
            [tokens],
            max_tokens=max_tokens,
            stop=stop,
            cancel=cancel,
            guides=[guide],
        )
        return gen

    def close(self) -> None:
        pass


def item(first: int, max_tokens: int = 6, guide: RunnerUpGuide | None = None) -> BatchItem:
    return BatchItem(lambda _engine: [first, *range(20)], max_tokens, guide=guide)  # type: ignore[arg-type]


def answer(first: int, max_tokens: int = 6, guide: RunnerUpGuide | None = None) -> tuple[int, ...]:
    [gen] = decode_batch(
        FakeDecoder(FakeKV()),
        [Slot(FakeKV(), 2)],  # type: ignore[arg-type]
        [[first, *range(20)]],
        max_tokens=max_tokens,
        guides=[guide],
    )
    return gen.tokens


@pytest.fixture
def pool() -> Any:
    engine = BatchEngine()
    worker = EngineWorker(lambda: engine)  # type: ignore[arg-type,return-value]
    shared = SideBySide(worker, lambda gen, queued_ms: None)
    yield engine, worker, shared
    worker.close()


def test_generations_queued_together_decode_in_one_batch_each_as_alone(pool: Any) -> None:
    """An import line's generation (with its guide) shares the steps too."""
    engine, worker, shared = pool
    release = hold_worker(worker)
    guide = lambda k: RunnerUpGuide(3) if k == 2 else None  # noqa: E731
    jobs = [shared.submit(item(k, guide=guide(k))) for k in (1, 2, 3)]
    release.set()
    assert [j.future.result(5).tokens for j in jobs] == [answer(k, guide=guide(k)) for k in (1, 2, 3)]
    assert answer(2, guide=guide(2)) != answer(2)
    assert engine.batches == 1 and engine.alone == [] and shared.groups == 1


def test_a_lone_generation_takes_the_ordinary_path(pool: Any) -> None:
    engine, _, shared = pool
    gen = shared.submit(item(7)).future.result(5)
    assert gen.tokens == answer(7) and engine.batches == 0 and len(engine.alone) == 1


@pytest.mark.parametrize("warm", [False, True])
def test_a_generation_arriving_while_a_batch_runs_joins_it_unless_warm(pool: Any, warm: bool) -> None:
    """A late generation joins the running batch; one whose prompt the interactive slot holds runs
    next on the ordinary path instead, where its KV cache is."""
    engine, worker, shared = pool
    engine.warm = {9} if warm else set()
    late: list[Any] = []
    engine.on_feed = lambda last: late or late.append(shared.submit(item(9, 4)))
    release = hold_worker(worker)
    first = [shared.submit(item(k)) for k in (1, 2)]
    release.set()
    assert [j.future.result(5).tokens for j in first] == [answer(1), answer(2)]
    assert late[0].future.result(5).tokens == answer(9, 4)
    assert engine.batches == 1
    assert engine.alone == ([[9, *range(20)]] if warm else [])


def test_a_client_that_leaves_stops_only_its_own(pool: Any) -> None:
    _, worker, shared = pool
    release = hold_worker(worker)
    jobs = [shared.submit(item(k)) for k in (1, 2, 3)]
    jobs[1].cancel.cancel("client disconnected")
    release.set()
    with pytest.raises(Cancelled):
        jobs[1].future.result(5)
    assert [jobs[0].future.result(5).tokens, jobs[2].future.result(5).tokens] == [answer(1), answer(3)]


def test_the_group_stops_growing_once_another_job_waits(pool: Any) -> None:
    """An editor's keystroke queued behind a running group: newcomers start the next group, after it."""
    engine, worker, shared = pool
    order: list[str] = []
    late: list[Any] = []

    def keystroke_then_client(last: bool) -> None:
        if not late:
            worker.submit(lambda e, c: order.append("keystroke"))
            late.append(shared.submit(item(9, 4)))
            late[0].future.add_done_callback(lambda _f: order.append("late client"))

    engine.on_feed = keystroke_then_client
    release = hold_worker(worker)
    first = [shared.submit(item(k)) for k in (1, 2)]
    release.set()
    assert [j.future.result(5).tokens for j in first] == [answer(1), answer(2)]
    assert late[0].future.result(5).tokens == answer(9, 4)
    assert order == ["keystroke", "late client"]
    assert engine.batches == 2  # the late client's group ran as a batch too: the clients overlapped


def test_a_client_typing_on_keeps_the_ordinary_path_and_its_kv_cache(pool: Any) -> None:
    """llama.vim drops its request as it sends the next, so two overlap for a moment: the one whose
    prompt the interactive slot holds runs alone first, where its cache is reused; the others
    decode side by side."""
    engine, worker, shared = pool
    engine.warm = {7}
    release = hold_worker(worker)
    jobs = [shared.submit(item(k)) for k in (1, 7, 2)]
    release.set()
    assert [j.future.result(5).tokens for j in jobs] == [answer(1), answer(7), answer(2)]
    assert engine.alone == [[7, *range(20)]] and engine.batches == 1


def test_a_request_dropped_as_the_next_arrives_does_not_make_a_batch(pool: Any) -> None:
    """llama.vim cancels its last request as it sends the next: the two overlapped, but only one is
    wanted, so it runs on the ordinary path (refreshing the interactive slot for the keys after)."""
    engine, worker, shared = pool
    release = hold_worker(worker)
    dropped = shared.submit(item(1))
    dropped.cancel.cancel("client disconnected")
    kept = shared.submit(item(2))
    release.set()
    assert kept.future.result(5).tokens == answer(2)
    assert engine.batches == 0 and engine.alone == [[2, *range(20)]]
