"""The batch loop without a model: shared heads evaluated once and copied, slots refilled as soon as a
sequence stops (continuous batching), the cell budget, cancellation, and empty slots on return."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fimble.completion.engine import BatchGeneration, StopCheck
from fimble.completion.engine.batch import Arrival, decode_batch
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.heads import CellCount, admission_order, shared_head
from fimble.completion.engine.slot import Slot
from tests.fakes import FakeDecoder, FakeKV, RunnerUpGuide

HEAD = list(range(100, 140))  # 40 tokens: a file's start, shared by the prompts cut from it


def tails(*ends: int) -> list[list[int]]:
    """Prompts of the shared head and a short tail each (a cursor further down the same file)."""
    return [[*HEAD, e, e + 1, e + 2] for e in ends]


def batch(n_slots: int, n_ctx: int = 4096) -> tuple[FakeKV, FakeDecoder, list[Slot]]:
    kv = FakeKV()
    return kv, FakeDecoder(kv, n_ctx=n_ctx), [Slot(kv, 2 + i) for i in range(n_slots)]


def alone(prompt: Sequence[int], max_tokens: int, guide: RunnerUpGuide | None = None) -> BatchGeneration:
    _, decoder, slots = batch(1)
    [gen] = decode_batch(decoder, slots, [prompt], max_tokens=max_tokens, guides=[guide])  # type: ignore[arg-type]
    return gen


def after(n: int) -> StopCheck:
    """A stop rule ending a request after ``n`` tokens (the fake's pieces are one character each)."""
    return lambda text: ("enough", len(text)) if len(text) >= n else None


def evaluated(decoder: FakeDecoder, pos: int, tok: int) -> int:
    """How many times the cell (``pos``, ``tok``) was evaluated, in any sequence."""
    return sum(1 for call in decoder.calls for _, p, t in call if (p, t) == (pos, tok))


def test_a_shared_head_is_evaluated_once_and_copied_to_the_other_sequences() -> None:
    prompts = [*tails(1, 5, 9), list(range(300, 345))]
    kv, decoder, slots = batch(4)
    got = decode_batch(decoder, slots, prompts, max_tokens=6)  # type: ignore[arg-type]
    assert all(evaluated(decoder, pos, tok) == 1 for pos, tok in enumerate(HEAD))
    assert len(kv.copies) == 2 and all((p0, p1) == (0, len(HEAD)) for _, _, p0, p1 in kv.copies)
    assert sorted(g.tokens_reused for g in got) == [0, 0, 40, 40]
    assert all(g.tokens_evaluated + g.tokens_reused == len(p) for g, p in zip(got, prompts, strict=True))
    # The copied cells are the head's: each answer is the one its prompt gets decoded alone.
    assert [g.tokens for g in got] == [alone(p, 6).tokens for p in prompts]
    assert all(not kv.held(s.seq_id) and not s.cells for s in slots)


def test_a_head_shorter_than_the_minimum_is_evaluated_again() -> None:
    short = [[7, 8, 9, 10, e] for e in (1, 2)]
    kv, decoder, slots = batch(2)
    decode_batch(decoder, slots, short, max_tokens=3)  # type: ignore[arg-type]
    assert kv.copies == [] and evaluated(decoder, 0, 7) == 2


def test_a_finished_sequence_s_slot_is_refilled_while_the_others_run() -> None:
    """Two slots, four requests: the second request stops after one token, so the third starts in
    its slot and ends before the first (in waves it would wait for the first to end)."""
    prompts = [[1, *range(20)], [2, *range(20)], [3, *range(20)], [4, *range(20)]]
    done: list[int] = []
    _, decoder, slots = batch(2)
    got = decode_batch(
        decoder,
        slots,  # type: ignore[arg-type]
        prompts,
        max_tokens=12,
        stops=[after(12), after(1), after(3), after(3)],
        on_done=lambda i, gen: done.append(i),
    )
    assert [len(g.tokens) for g in got] == [12, 1, 3, 3]
    assert done.index(2) < done.index(0) and done.index(3) < done.index(0)
    assert max(len({seq for seq, _, _ in call}) for call in decoder.calls) == 2  # never more than the slots
    assert [g.tokens for g in got] == [
        alone(p, n).tokens[:k] for p, n, k in zip(prompts, [12] * 4, [12, 1, 3, 3], strict=True)
    ]
    assert all(not s.cells for s in slots)


def test_a_waiting_prompt_starts_from_the_head_a_finished_sequence_leaves() -> None:
    """One slot: the second prompt of a file takes the first one's slot and keeps its head's cells."""
    prompts = tails(1, 5)
    kv, decoder, slots = batch(1)
    got = decode_batch(decoder, slots, prompts, max_tokens=4)  # type: ignore[arg-type]
    assert all(evaluated(decoder, pos, tok) == 1 for pos, tok in enumerate(HEAD))
    assert kv.copies == [] and [g.tokens_reused for g in got] == [0, 40]
    assert [g.tokens for g in got] == [alone(p, 4).tokens for p in prompts]


def test_shared_heads_count_once_in_the_cell_budget() -> None:
    """Each prompt and its tokens need 53 cells, two need 106 apart but 66 with one head: both fit 80
    cells at once, and neither runs out of context."""
    prompts = tails(1, 5)
    # together, with the head counted once: 40 + 3 + 3 + 2 * 10 = 66 cells of 80; apart 2 * 53 = 106
    _, decoder, slots = batch(2, n_ctx=80)
    got = decode_batch(decoder, slots, prompts, max_tokens=10)  # type: ignore[arg-type]
    assert max(len(call) for call in decoder.calls if len({s for s, _, _ in call}) > 1) == 2
    assert [g.stop_reason for g in got] == ["max_tokens", "max_tokens"]


def test_prompts_that_do_not_fit_together_wait_for_room() -> None:
    prompts = [[1, *range(30)], [2, *range(30)]]  # 31 + 10 cells each, 60 in all
    _, decoder, slots = batch(2, n_ctx=60)
    got = decode_batch(decoder, slots, prompts, max_tokens=10)  # type: ignore[arg-type]
    assert all(len({s for s, _, _ in call}) == 1 for call in decoder.calls)  # one after the other
    assert [g.stop_reason for g in got] == ["max_tokens", "max_tokens"]


def test_each_prompt_s_own_limit_stops_it_and_budgets_its_cells() -> None:
    """Two prompts of 31 tokens in 70 cells: with 20 tokens each they would run one after the other;
    with their own limits of 3 and 5 they fit together."""
    prompts = [[1, *range(30)], [2, *range(30)]]
    _, decoder, slots = batch(2, n_ctx=70)
    got = decode_batch(decoder, slots, prompts, max_tokens=20, limits=[3, 5])  # type: ignore[arg-type]
    assert [len(g.tokens) for g in got] == [3, 5] and {g.stop_reason for g in got} == {"max_tokens"}
    assert any(len({s for s, _, _ in call}) == 2 for call in decoder.calls)


def test_the_interactive_slot_s_cells_are_dropped_only_when_the_batch_needs_them() -> None:
    kv, decoder, slots = batch(2, n_ctx=100)
    interactive = Slot(kv, 0, park=1)
    interactive.prepare(list(range(50)), kv.decode)
    decode_batch(decoder, slots, [[1, 2, 3]], max_tokens=4, interactive=interactive)  # type: ignore[arg-type]
    assert len(interactive.cells) == 50
    [gen] = decode_batch(decoder, slots, [list(range(60))], max_tokens=4, interactive=interactive)  # type: ignore[arg-type]
    assert interactive.cells == [] and gen.stop_reason == "max_tokens"


def test_a_server_s_batch_runs_narrower_rather_than_drop_the_interactive_slot() -> None:
    """100 cells, 50 held by the editor's prompt: two prompts of 31 + 10 cells fit beside it one at a
    time, so with ``keep_interactive`` they run one after the other and the editor keeps its cells;
    a prompt that fits only without them still gets them."""
    kv, decoder, slots = batch(2, n_ctx=100)
    interactive = Slot(kv, 0, park=1)
    interactive.prepare(list(range(50)), kv.decode)
    prompts = [[1, *range(30)], [2, *range(30)]]
    kept = {"interactive": interactive, "keep_interactive": True}
    got = decode_batch(decoder, slots, prompts, max_tokens=10, **kept)  # type: ignore[arg-type]
    assert len(interactive.cells) == 50 and {g.stop_reason for g in got} == {"max_tokens"}
    assert all(len({s for s, _, _ in call}) == 1 for call in decoder.calls)  # one after the other
    [gen] = decode_batch(decoder, slots, [list(range(60))], max_tokens=4, **kept)  # type: ignore[arg-type]
    assert interactive.cells == [] and gen.stop_reason == "max_tokens"


def test_a_cancel_stops_running_and_waiting_prompts_and_empties_the_slots() -> None:
    cancel = CancelToken()
    prompts = [*tails(1, 5, 9), [1, 2, 3]]
    kv, decoder, slots = batch(2)
    decoder.cancel_after = 6  # two prompts evaluated, a few steps, then aborted
    done: list[int] = []
    got = decode_batch(
        decoder,
        slots,
        prompts,
        max_tokens=20,
        cancel=cancel,
        on_done=lambda i, g: done.append(i),  # type: ignore[arg-type]
    )
    assert [g.stop_reason for g in got] == ["cancelled"] * 4
    assert sorted(done) == [0, 1, 2, 3]
    assert all(not s.cells and not kv.held(s.seq_id) for s in slots)
    cancelled = CancelToken()
    cancelled.cancel("before")
    got = decode_batch(decoder, slots, prompts, max_tokens=4, cancel=cancelled)  # type: ignore[arg-type]
    assert all(g.stop_reason == "cancelled" and g.tokens_evaluated == 0 for g in got)


def test_heads_order_and_cells() -> None:
    assert shared_head([1, 2, 3], [1, 2, 3]) == 2  # the last prompt token is always evaluated
    assert shared_head([1, 2, 9, 4], [1, 2, 3, 4]) == 2
    assert admission_order([[3], [1, 2], [1]]) == [2, 1, 0]
    count = CellCount()
    count.sync(2, 10)
    count.copy(2, 3, 6)
    count.sync(3, 8)
    assert count.used == 12
    count.sync(2, 0)
    assert count.used == 8
    count.sync(3, 0)
    assert count.used == 0
    with pytest.raises(AssertionError):
        count.copy(3, 4, 1)


def test_prompts_fed_while_it_runs_join_it_and_a_gone_one_stops_alone() -> None:
    """A feed (independent clients: ``side_by_side``) gives prompts between steps; each is answered
    as if alone and reported after the call's own; one whose own token is cancelled stops, the
    others run on; asked with ``last``, an empty feed ends the call."""
    first, late, gone_early, gone_late = [1, *range(20)], [2, *range(30)], [3, *range(20)], [4, *range(25)]
    early, later = CancelToken(), CancelToken()
    early.cancel("client left")
    fed: list[bool] = []
    rounds = {
        1: [Arrival(late, 6), Arrival(gone_early, 6, cancel=early)],
        3: [Arrival(gone_late, 12, cancel=later)],
    }

    def feed(last: bool) -> list[Arrival]:
        fed.append(last)
        if len(fed) == 5:
            later.cancel("client left")
        return rounds.get(len(fed), [])

    done: dict[int, BatchGeneration] = {}
    _, decoder, slots = batch(4)
    got = decode_batch(
        decoder,
        slots,  # type: ignore[arg-type]
        [first],
        max_tokens=8,
        feed=feed,
        on_done=lambda i, g: done.__setitem__(i, g),
    )
    assert got == [done[0]] and done[0].tokens == alone(first, 8).tokens
    assert done[1].tokens == alone(late, 6).tokens
    assert done[2].stop_reason == "cancelled" and done[2].tokens_evaluated == 0
    assert done[3].stop_reason == "cancelled" and 0 < len(done[3].tokens) < 12
    assert fed[-1] is True and fed.count(True) == 1
    assert all(not s.cells for s in slots)


def test_a_guided_prompt_takes_its_guide_s_picks_from_its_own_row() -> None:
    """Among unguided prompts, a guided one (an import line) gets the tokens its guide picks from the
    logits of its own batch row, its first token included, and says whether the guide stepped aside;
    the others are unchanged."""
    prompts = [[1, *range(20)], [2, *range(20)], [3, *range(20)]]
    _, decoder, slots = batch(3)
    got = decode_batch(decoder, slots, prompts, max_tokens=6, guides=[None, RunnerUpGuide(2), None])  # type: ignore[arg-type]
    plain = alone(prompts[1], 6)
    assert [t >= 1000 for t in got[1].tokens] == [True, True, False, False, False, False]
    assert got[1].tokens != plain.tokens and got[1].tokens == alone(prompts[1], 6, RunnerUpGuide(2)).tokens
    assert got[1].guide == "released" and got[0].guide == got[2].guide == ""
    assert [got[0].tokens, got[2].tokens] == [alone(prompts[0], 6).tokens, alone(prompts[2], 6).tokens]
    kept = decode_batch(decoder, slots, prompts[:2], max_tokens=3, guides=[RunnerUpGuide(9), None])  # type: ignore[arg-type]
    assert kept[0].guide == "kept" and all(t >= 1000 for t in kept[0].tokens)
