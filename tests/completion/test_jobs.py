"""Awaiting a job from asyncio (both front doors): result, timeout leaves it running, the awaiting task
cancelled or the client gone cancels it, and the job's own future is never cancelled behind the
worker's back."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from fimble.completion.jobs import Awaiting, run_job
from fimble.completion.scheduler import Job
from fimble.errors import Cancelled


class _Canceller:
    def __init__(self) -> None:
        self.jobs: list[Job[Any]] = []

    def __call__(self, job: Job[Any]) -> None:
        self.jobs.append(job)


def _job() -> Job[str]:
    return Job(lambda e, c: "x")


def _finish_later(job: Job[str], value: str, delay: float = 0.05) -> None:
    threading.Timer(delay, lambda: job.future.set_result(value)).start()  # as the engine thread does


async def test_result_arrives_from_another_thread() -> None:
    job, cancel = _job(), _Canceller()
    _finish_later(job, "done")
    assert await run_job(job, cancel) == "done"
    assert cancel.jobs == [] and not job.cancel.cancelled


async def test_a_job_failure_is_raised_to_the_waiter() -> None:
    job = _job()
    job.future.set_exception(Cancelled("superseded"))
    with pytest.raises(Cancelled, match="superseded"):
        await run_job(job, _Canceller())


async def test_a_timeout_leaves_the_job_running_and_a_later_wait_gets_it() -> None:
    job, cancel = _job(), _Canceller()
    waiting = Awaiting(job, cancel)
    with pytest.raises(TimeoutError):
        await waiting.result(0.01)
    assert not job.cancel.cancelled and not job.future.cancelled() and cancel.jobs == []
    _finish_later(job, "late")
    assert await waiting.result(5) == "late"


async def test_the_awaiting_task_cancelled_cancels_the_job_once() -> None:
    job, cancel = _job(), _Canceller()
    task = asyncio.ensure_future(run_job(job, cancel, reason="request ended"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancel.jobs == [job] and job.cancel.reason == "request ended"
    assert not job.future.cancelled()  # the worker decides what becomes of it


async def test_the_client_gone_cancels_the_job() -> None:
    job, cancel = _job(), _Canceller()
    gone = asyncio.Event()
    asyncio.get_running_loop().call_later(0.02, gone.set)
    with pytest.raises(Cancelled, match="client disconnected"):
        await run_job(job, cancel, gone=gone.wait())
    assert cancel.jobs == [job] and job.cancel.reason == "client disconnected"


async def test_the_result_wins_over_a_client_still_there() -> None:
    job, cancel = _job(), _Canceller()
    _finish_later(job, "done", 0.01)
    assert await run_job(job, cancel, gone=asyncio.Event().wait()) == "done"
    assert cancel.jobs == []


async def test_when_done_runs_on_the_loop_after_the_outcome() -> None:
    job = _job()
    waiting = Awaiting(job, _Canceller())
    seen = asyncio.Event()
    waiting.when_done(seen.set)
    _finish_later(job, "done", 0.01)
    await asyncio.wait_for(seen.wait(), 5)
    assert waiting.finished and await waiting.result() == "done"
