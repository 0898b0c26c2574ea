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


# A FIM prompt: context, then PRE + the file's lines above the cursor, then SUF + suffix + MID.
PRE, SUF, MID = 900, 901, 902
LINES = list(range(1000, 1200))  # the file's lines, as tokens


def fim(context: list[int], lines: list[int], suffix: list[int]) -> list[int]:
    return [*context, PRE, *lines, SUF, *suffix, MID]


def test_lines_above_the_cursor_move_after_a_jump_down() -> None:
    """The prefix's first line moved 40 tokens down: the 120 lines both prompts show are moved,
    only the new lines and the suffix are evaluated."""
    ctx = [1, 2, 3]
    cached = [*fim(ctx, LINES[0:160], LINES[160:170]), 5, 5]  # + generated tokens
    prompt = fim(ctx, LINES[40:190], LINES[190:200])
    suf = prompt.index(SUF)
    plan = plan_reuse(
        cached, prompt, 8, limit=3, lines_to=suf, lines_min_chunk=64, source_end=cached.index(SUF)
    )
    assert plan.head == 4
    assert plan.chunks == (Chunk(src=4 + 40, dst=4, n=120),)
    assert plan.missing(len(prompt)) == list(range(4 + 120, len(prompt)))


def test_lines_never_move_right() -> None:
    """After a jump up, or from a first prompt into the full one, the lines had less before them
    than they now have: their KV lacks what the new prompt reads for, so they are read again."""
    ctx = [1, 2, 3]
    cached = fim(ctx, LINES[40:190], LINES[190:200])
    prompt = fim(ctx, LINES[0:150], LINES[150:160])
    plan = plan_reuse(cached, prompt, 8, limit=3, lines_to=prompt.index(SUF), source_end=cached.index(SUF))
    assert plan.chunks == ()
    small = fim(ctx, LINES[120:150], [7])  # a first prompt: the lines right above the cursor
    full = fim([4, 5, 6, 7, 8, 9], LINES[40:150], [7])
    assert plan_reuse(small, full, 8, limit=6, lines_to=full.index(SUF), lines_min_chunk=16).chunks == ()


def test_lines_are_never_taken_from_the_old_suffix() -> None:
    """The cached suffix's KV remembers the old cursor: lines it shows are evaluated again."""
    ctx = [1, 2, 3]
    cached = fim(ctx, LINES[0:100], LINES[100:200])
    prompt = fim(ctx, LINES[20:180], LINES[180:190])  # lines 20-99 move left, 100-179 are the old suffix
    suf = prompt.index(SUF)
    bounded = plan_reuse(cached, prompt, 8, limit=3, lines_to=suf, source_end=cached.index(SUF))
    assert bounded.chunks == (Chunk(src=4 + 20, dst=4, n=80),)
    unbounded = plan_reuse(cached, prompt, 8, limit=3, lines_to=suf)
    assert unbounded.reused > bounded.reused


def test_short_runs_of_lines_are_not_moved() -> None:
    """A run of the file's lines shorter than ``lines_min_chunk`` may be code that recurs
    elsewhere; only the context (before ``limit``) takes short chunks."""
    cached = fim([1, 2, 3], [8, *LINES[0:30]], [7])
    prompt = fim([1, 2, 3], LINES[0:30], [7])
    plan = plan_reuse(cached, prompt, 8, limit=3, lines_to=prompt.index(SUF), lines_min_chunk=64)
    assert plan.chunks == ()
    assert plan_reuse(cached, prompt, 8, limit=3, lines_to=prompt.index(SUF), lines_min_chunk=16).chunks


def test_without_lines_to_the_prompt_after_the_limit_stays_put() -> None:
    cached = fim([1, 2, 3], LINES[0:160], [7])
    prompt = fim([1, 2, 3], LINES[40:190], [7])
    assert plan_reuse(cached, prompt, 8, limit=3).chunks == ()
