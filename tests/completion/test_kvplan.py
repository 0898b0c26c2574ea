"""The KV reuse planner: common prefix plus moved chunks."""

from __future__ import annotations

from fimble.completion.engine.kvplan import Chunk, plan_reuse


def test_prefix_only_when_disabled() -> None:
    plan = plan_reuse([1, 2, 3, 4], [1, 2, 9, 4], min_chunk=0)
    assert plan.head == 2 and plan.chunks == ()
    assert plan.missing(4) == [2, 3]


def test_last_token_is_always_evaluated() -> None:
    plan = plan_reuse([1, 2, 3], [1, 2, 3], min_chunk=2)
    assert plan.head == 2
    assert plan.missing(3) == [2]


def test_insertion_moves_the_suffix_right() -> None:
    cached = [1, 2, 3, 50, 60, 70, 80, 90, 99, 7, 7]  # ... prefix, suffix run, middle, generated
    prompt = [1, 2, 3, 4, 50, 60, 70, 80, 90, 99]  # one token typed before the suffix
    plan = plan_reuse(cached, prompt, min_chunk=3)
    assert plan.head == 3
    assert plan.chunks == (Chunk(src=3, dst=4, n=5),)
    assert plan.missing(len(prompt)) == [3, 9]
    assert plan.gaps() == [(8, 11)]
    assert plan.reused == 8


def test_deletion_moves_the_suffix_left() -> None:
    cached = [1, 2, 3, 4, 50, 60, 70, 80, 99]
    prompt = [1, 2, 50, 60, 70, 80, 99]
    plan = plan_reuse(cached, prompt, min_chunk=3)
    assert plan.chunks == (Chunk(src=4, dst=2, n=4),)
    assert plan.gaps() == [(2, 4), (8, 9)]
    assert plan.missing(len(prompt)) == [6]


def test_short_runs_are_not_worth_moving() -> None:
    plan = plan_reuse([1, 5, 6, 9], [2, 5, 6, 9], min_chunk=3)
    assert plan.head == 0 and plan.chunks == ()


def test_replaced_chunk_in_the_middle() -> None:
    cached = [1, 2, 10, 11, 12, 13, 20, 21, 22, 23, 99]
    prompt = [1, 2, 30, 31, 20, 21, 22, 23, 99]
    plan = plan_reuse(cached, prompt, min_chunk=4)
    assert plan.chunks == (Chunk(src=6, dst=4, n=4),)
    assert plan.missing(len(prompt)) == [2, 3, 8]
    assert plan.gaps() == [(2, 6), (10, 11)]
