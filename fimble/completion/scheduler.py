"""Who runs first on the one model, and what a new job does to the work under way: the rules, once.

The engine worker (``fimble.completion.worker``) runs one job at a time. Each job has a kind; the
kinds, most urgent first:

- ``REQUEST``: someone waits for it now: a keystroke's suggestion (also the one where the cursor just
  went, ``warm_at``, which the next keystroke joins), an HTTP completion, a settings change.
- ``ADOPTED``: the own generation of the newest request that had joined a running generation which
  then went elsewhere (``Flights.land``).
- ``PREFETCH``: what follows an answer, generated before anyone accepts it (``WorkAhead``).
- ``WARMUP``: the warmer's idle step (``fimble.completion.warmup``): never queued, it fills the time
  when no job of a more urgent kind waits.
- ``BATCH``: work for nobody at the keyboard (a batch pipeline); waits while the warmer has work.
- ``INDEX``: indexing. Not a worker job: it steps aside (the worker's ``Busy`` hook, which the
  index runner implements) while the worker runs anything else.

``RULES`` says, for a job of kind A under way (running, or for ``PREEMPT`` also queued) and a newly
submitted job of kind B, what happens to A: it stays and B waits its turn (``AFTER``; the queue is
ordered by kind, then by arrival), it is cancelled and dropped because its work is for nobody now
(``PREEMPT``), or it is stopped now and runs again later (``REQUEUE``: an idle step resumes where it
was stopped, indexing resumes after ``Busy.exit``, a batch job runs again from its start).
Besides the table: a new job with a ``key`` (a document, an HTTP client) supersedes every queued or
running job with the same key, whatever its kind (``supersedes``); and ``ABORTS_SHORT`` names the
kinds whose cancellation stops even a short prompt evaluation, which the engine otherwise finishes
(``EngineConfig.abort_min_tokens``; the token's ``background`` flag).

The table holds today's behaviour: a request stops the prefetch (queued or running) and the idle
step; requests wait for one another (a newer keystroke in the same document supersedes by key);
nothing stops a request.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fimble.completion.engine.cancel import CancelToken

if TYPE_CHECKING:
    from fimble.completion.engine import Engine

__all__ = [
    "ABORTS_SHORT",
    "RULES",
    "Decision",
    "Job",
    "JobKind",
    "JobQueue",
    "aborts_short",
    "decide",
    "supersedes",
    "token_for",
]

T = TypeVar("T")


class JobKind(IntEnum):
    """Job kinds; a smaller value is more urgent (the queue's order)."""

    REQUEST = 0
    ADOPTED = 1
    PREFETCH = 2
    WARMUP = 3
    BATCH = 4
    INDEX = 5


class Decision(Enum):
    """What a newly submitted job does to a job under way (see the module's docstring)."""

    AFTER = "after"
    PREEMPT = "preempt"
    REQUEUE = "requeue"


_A, _P, _Q = Decision.AFTER, Decision.PREEMPT, Decision.REQUEUE
K = JobKind

# Rows: the job under way. Columns: the new job, in ``JobKind`` order.
#                  new: REQUEST ADOPTED PREFETCH WARMUP BATCH INDEX
RULES: dict[JobKind, tuple[Decision, ...]] = {
    K.REQUEST:   (_A,    _A,     _A,      _A,    _A,   _A),  # someone waits: nothing stops it
    K.ADOPTED:   (_A,    _A,     _A,      _A,    _A,   _A),  # so does its newest adopter
    K.PREFETCH:  (_P,    _P,     _A,      _A,    _A,   _A),  # a request makes its guess moot
    K.WARMUP:    (_Q,    _Q,     _Q,      _A,    _A,   _A),  # any job first; resumed when idle
    K.BATCH:     (_Q,    _Q,     _Q,      _A,    _A,   _A),  # the editor first; run again later
    K.INDEX:     (_Q,    _Q,     _Q,      _Q,    _Q,   _A),  # steps aside for all model work
}  # fmt: skip

ABORTS_SHORT = frozenset({JobKind.PREFETCH, JobKind.BATCH})  # nobody waits on their prompt


def decide(running: JobKind, new: JobKind) -> Decision:
    """What a new job of kind ``new`` does to a job of kind ``running`` under way."""
    return RULES[running][new]


def supersedes(new_key: str | None, old_key: str | None) -> bool:
    """A job with a key replaces the older jobs with that key (the same document or client): only
    the newest keystroke's answer is wanted."""
    return new_key is not None and new_key == old_key


def aborts_short(kind: JobKind) -> bool:
    """Whether a cancel stops even a short prompt evaluation of a job of ``kind``: a request's
    short evaluation is finished (its prompt stays in the KV cache for the next keystroke), work
    nobody waits on stops at once."""
    return kind in ABORTS_SHORT


def token_for(kind: JobKind) -> CancelToken:
    """The cancel token of a new job of ``kind``."""
    return CancelToken(background=aborts_short(kind))


@dataclass(eq=False)
class Job(Generic[T]):
    """A unit of model work: ``fn`` runs on the engine thread with the engine and ``cancel``."""

    fn: Callable[[Engine, CancelToken], T]
    key: str | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    future: Future[T] = field(default_factory=Future)
    kind: JobKind = JobKind.REQUEST
    seq: int = field(default=-1, repr=False)  # arrival order, set when first queued


def _order(job: Job[Any]) -> tuple[int, int]:
    return (int(job.kind), job.seq)


class JobQueue:
    """Jobs waiting for the worker: the most urgent kind first, in order of arrival within a kind.
    Not thread-safe: the worker holds its lock around every call."""

    def __init__(self) -> None:
        self._jobs: list[Job[Any]] = []
        self._seq = itertools.count()

    def push(self, job: Job[Any]) -> None:
        """Queue ``job``; a requeued job keeps its place in arrival order."""
        if job.seq < 0:
            job.seq = next(self._seq)
        bisect.insort(self._jobs, job, key=_order)

    def peek(self) -> Job[Any] | None:
        return self._jobs[0] if self._jobs else None

    def pop(self) -> Job[Any]:
        return self._jobs.pop(0)

    def remove(self, job: Job[Any]) -> bool:
        """Take ``job`` out; False when it was not queued."""
        for i, queued in enumerate(self._jobs):
            if queued is job:
                del self._jobs[i]
                return True
        return False

    def __contains__(self, job: object) -> bool:
        return any(queued is job for queued in self._jobs)

    def __iter__(self) -> Iterator[Job[Any]]:
        return iter(list(self._jobs))

    def __len__(self) -> int:
        return len(self._jobs)
