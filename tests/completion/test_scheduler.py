"""The scheduler's rules as a table, without a model: every (job under way, new job) pair's decision,
same-key supersession, which kinds abort a short prompt evaluation, and the queue's order."""

from __future__ import annotations

import itertools

import pytest

from fimble.completion.scheduler import (
    RULES,
    Decision,
    Job,
    JobKind,
    JobQueue,
    aborts_short,
    decide,
    supersedes,
    token_for,
)

K = JobKind
AFTER, PREEMPT, REQUEUE = Decision.AFTER, Decision.PREEMPT, Decision.REQUEUE

# Every pair not listed: the new job waits its turn (AFTER).
NOT_AFTER = {
    # A request makes a prefetch's guess moot: dropped, queued or running (it was ``_cancel_prefetch``).
    (K.PREFETCH, K.REQUEST): PREEMPT,
    (K.PREFETCH, K.ADOPTED): PREEMPT,
    # Any submitted job stops the warmer's idle step, which resumes when the worker is idle again.
    (K.WARMUP, K.REQUEST): REQUEUE,
    (K.WARMUP, K.ADOPTED): REQUEUE,
    (K.WARMUP, K.PREFETCH): REQUEUE,
    # Batch work gives way to the editor and runs again later.
    (K.BATCH, K.REQUEST): REQUEUE,
    (K.BATCH, K.ADOPTED): REQUEUE,
    (K.BATCH, K.PREFETCH): REQUEUE,
    # Indexing steps aside (the ``Busy`` hook) for any model work.
    (K.INDEX, K.REQUEST): REQUEUE,
    (K.INDEX, K.ADOPTED): REQUEUE,
    (K.INDEX, K.PREFETCH): REQUEUE,
    (K.INDEX, K.WARMUP): REQUEUE,
    (K.INDEX, K.BATCH): REQUEUE,
}


@pytest.mark.parametrize(
    ("running", "new"), list(itertools.product(JobKind, JobKind)), ids=lambda k: k.name.lower()
)
def test_decision_for_each_pair(running: JobKind, new: JobKind) -> None:
    assert decide(running, new) is NOT_AFTER.get((running, new), AFTER)


def test_the_table_covers_every_kind() -> None:
    assert set(RULES) == set(JobKind)
    assert all(len(row) == len(JobKind) for row in RULES.values())


def test_nothing_stops_a_request_and_no_kind_is_disturbed_by_a_less_urgent_one() -> None:
    for new in JobKind:
        assert decide(K.REQUEST, new) is AFTER
        assert decide(K.ADOPTED, new) is AFTER
    for running, new in itertools.product(JobKind, JobKind):
        if new >= running:
            assert decide(running, new) is AFTER, (running, new)


@pytest.mark.parametrize(
    ("kind", "aborts"),
    [
        (K.REQUEST, False),  # a request's short prompt is finished: the next keystroke reuses it
        (K.ADOPTED, False),
        (K.PREFETCH, True),  # nobody waits: a cancel stops even its short prompt evaluation
        (K.WARMUP, False),  # a short last warm-up step is kept (saved before the keystroke)
        (K.BATCH, True),
        (K.INDEX, False),
    ],
)
def test_which_kinds_abort_a_short_prompt_evaluation(kind: JobKind, aborts: bool) -> None:
    assert aborts_short(kind) is aborts
    assert token_for(kind).background is aborts


@pytest.mark.parametrize(
    ("new", "old", "replaces"),
    [("doc", "doc", True), ("doc", "other", False), (None, None, False), ("doc", None, False)],
)
def test_same_key_supersedes(new: str | None, old: str | None, replaces: bool) -> None:
    assert supersedes(new, old) is replaces


def _job(kind: JobKind, name: str) -> Job[str]:
    return Job(lambda e, c: name, name, kind=kind)


def test_queue_orders_by_kind_then_arrival() -> None:
    queue = JobQueue()
    jobs = [
        _job(K.BATCH, "b1"),
        _job(K.PREFETCH, "p1"),
        _job(K.REQUEST, "r1"),
        _job(K.ADOPTED, "a1"),
        _job(K.REQUEST, "r2"),
        _job(K.PREFETCH, "p2"),
    ]
    for job in jobs:
        queue.push(job)
    assert [j.key for j in queue] == ["r1", "r2", "a1", "p1", "p2", "b1"]
    assert queue.remove(jobs[2]) and not queue.remove(jobs[2])
    assert jobs[2] not in queue and len(queue) == 5
    first = queue.pop()
    assert first.key == "r2"
    queue.push(first)  # requeued: back at its place among its kind, not behind later arrivals
    assert [j.key for j in queue][:2] == ["r2", "a1"]
