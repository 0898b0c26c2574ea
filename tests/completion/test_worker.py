"""The engine worker: one job at a time, supersede by key, cancel, load failures kept; the scheduler's
rules (``scheduler.RULES``) on fake jobs: order by kind, pre-emption, requeue, indexing steps aside."""

from __future__ import annotations

import threading
import time

import pytest

from fimble.completion.engine.cancel import CancelToken
from fimble.completion.scheduler import JobKind
from fimble.completion.worker import EngineWorker
from fimble.errors import Cancelled, ModelNotFound
from tests.fakes import hold_worker


class FakeEngine:
    def close(self) -> None:
        pass


def test_jobs_run_in_order_on_one_thread() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    seen: list[str] = []
    jobs = [
        worker.submit(lambda e, c, i=i: seen.append(threading.current_thread().name) or i) for i in range(5)
    ]
    assert [j.future.result(5) for j in jobs] == list(range(5))
    assert set(seen) == {"fimble-engine"}
    worker.close()


def test_newer_job_with_same_key_supersedes_running_one() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    started = threading.Event()

    def slow(_e: object, cancel: CancelToken) -> str:
        started.set()
        for _ in range(500):
            if cancel.cancelled:
                raise Cancelled(cancel.reason)
            time.sleep(0.01)
        return "finished"

    first = worker.submit(slow, key="doc")
    assert started.wait(5)
    queued = worker.submit(lambda e, c: "never", key="doc")
    newest = worker.submit(lambda e, c: "newest", key="doc")
    with pytest.raises(Cancelled):
        first.future.result(5)
    with pytest.raises(Cancelled):
        queued.future.result(5)
    assert newest.future.result(5) == "newest"
    worker.close()


def test_other_keys_are_not_superseded() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    a = worker.submit(lambda e, c: "a", key="a")
    b = worker.submit(lambda e, c: "b", key="b")
    assert (a.future.result(5), b.future.result(5)) == ("a", "b")
    worker.close()


def test_load_failure_is_reported_to_every_job_and_worker_stays_up() -> None:
    def load() -> FakeEngine:
        raise ModelNotFound("model x is not downloaded: run `fimble models pull x`")

    worker = EngineWorker(load)  # type: ignore[arg-type]
    assert worker.ready.wait(5)
    for _ in range(2):
        job = worker.submit(lambda e, c: "x")
        with pytest.raises(ModelNotFound, match="fimble models pull"):
            job.future.result(5)
    worker.close()


def test_superseding_a_job_whose_future_was_cancelled_by_its_waiter() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    gate = threading.Event()
    blocker = worker.submit(lambda e, c: gate.wait(5))
    queued = worker.submit(lambda e, c: "old", key="doc")
    queued.future.cancel()  # what asyncio.wrap_future does when the awaiting task is cancelled
    newer = worker.submit(lambda e, c: "new", key="doc")  # must not raise InvalidStateError
    worker.cancel(newer)
    newest = worker.submit(lambda e, c: "newest", key="doc")
    gate.set()
    assert blocker.future.result(5) is True
    assert newest.future.result(5) == "newest"
    worker.close()


class _IdleWarmer:
    """Counts idle steps; each step waits until cancelled or 0.2 s, and wants ``steps`` in all."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.ran = 0
        self.cancelled = 0
        self.started = threading.Event()

    def idle(self, _engine: object, cancel: CancelToken) -> bool:
        self.ran += 1
        self.started.set()
        for _ in range(20):
            if cancel.cancelled:
                self.cancelled += 1
                return True
            time.sleep(0.01)
        return self.ran < self.steps


def test_idle_work_runs_after_jobs_and_yields_to_a_new_job() -> None:
    warmer = _IdleWarmer(steps=1000)
    worker = EngineWorker(FakeEngine, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    assert worker.submit(lambda e, c: 1).future.result(5) == 1
    assert warmer.started.wait(5)  # idle time went to the warmer
    assert worker.submit(lambda e, c: 2).future.result(5) == 2
    assert warmer.cancelled >= 1
    worker.close()


def test_idle_work_stops_when_the_warmer_has_nothing_left() -> None:
    warmer = _IdleWarmer(steps=2)
    worker = EngineWorker(FakeEngine, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    worker.submit(lambda e, c: 1).future.result(5)
    time.sleep(0.8)
    assert warmer.ran == 2
    worker.close()


def _held(started: threading.Event, result: str = "done"):  # type: ignore[no-untyped-def]
    """A job that runs until cancelled (or 5 s); it says when it started."""

    def run(_e: object, cancel: CancelToken) -> str:
        started.set()
        for _ in range(500):
            if cancel.cancelled:
                raise Cancelled(cancel.reason)
            time.sleep(0.01)
        return result

    return run


def test_queued_jobs_run_most_urgent_kind_first_then_in_arrival_order() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    seen: list[str] = []
    gate = hold_worker(worker)
    order = [
        ("batch", JobKind.BATCH),
        ("prefetch-a", JobKind.PREFETCH),
        ("prefetch-b", JobKind.PREFETCH),
    ]
    jobs = [worker.submit(lambda e, c, n=n: seen.append(n), kind=k) for n, k in order]
    gate.set()
    for job in jobs:
        job.future.result(5)
    assert seen == ["prefetch-a", "prefetch-b", "batch"]

    gate = hold_worker(worker)
    seen.clear()
    order = [("adopted", JobKind.ADOPTED), ("request-1", JobKind.REQUEST), ("request-2", JobKind.REQUEST)]
    jobs = [worker.submit(lambda e, c, n=n: seen.append(n), kind=k) for n, k in order]
    gate.set()
    for job in jobs:
        job.future.result(5)
    assert seen == ["request-1", "request-2", "adopted"]
    worker.close()


def test_a_request_preempts_a_running_prefetch_and_drops_a_queued_one() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    started = threading.Event()
    running = worker.submit(_held(started), key="prefetch\0a", kind=JobKind.PREFETCH)
    assert started.wait(5)
    queued = worker.submit(lambda e, c: "never", key="prefetch\0b", kind=JobKind.PREFETCH)
    assert running.cancel.background and queued.cancel.background  # even a short prompt stops
    request = worker.submit(lambda e, c: "answer", key="doc")
    assert not request.cancel.background
    with pytest.raises(Cancelled):
        running.future.result(5)
    assert running.cancel.reason == "pre-empted"
    with pytest.raises(Cancelled, match="pre-empted"):
        queued.future.result(5)
    assert request.future.result(5) == "answer"
    worker.close()


def test_a_prefetch_does_not_disturb_a_request_nor_another_prefetch() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    started = threading.Event()
    request = worker.submit(_held(started, "answer"), key="doc")
    assert started.wait(5)
    first = worker.submit(lambda e, c: "a", key="prefetch\0a", kind=JobKind.PREFETCH)
    second = worker.submit(lambda e, c: "b", key="prefetch\0b", kind=JobKind.PREFETCH)
    assert not request.cancel.cancelled and not first.cancel.cancelled
    worker.cancel(request)
    assert (first.future.result(5), second.future.result(5)) == ("a", "b")
    worker.close()


def test_same_key_supersedes_across_kinds() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    gate = hold_worker(worker)
    batch = worker.submit(lambda e, c: "old", key="k", kind=JobKind.BATCH)
    newer = worker.submit(lambda e, c: "new", key="k", kind=JobKind.BATCH)
    request = worker.submit(lambda e, c: "request", key="k")
    gate.set()
    for old in (batch, newer):
        with pytest.raises(Cancelled, match="superseded"):
            old.future.result(5)
    assert request.future.result(5) == "request"
    worker.close()


def test_a_request_requeues_running_batch_work_which_runs_again_after_it() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    seen: list[str] = []
    runs = []
    started = threading.Event()

    def batch(_e: object, cancel: CancelToken) -> str:
        runs.append(cancel.reason)
        seen.append("batch")
        started.set()
        for _ in range(20):
            if cancel.cancelled:
                return "stopped"  # a partial outcome: dropped, the job runs again
            time.sleep(0.01)
        return f"batch after {len(runs)} runs"

    job = worker.submit(batch, kind=JobKind.BATCH)
    assert started.wait(5)
    request = worker.submit(lambda e, c: seen.append("request") or "answer")
    assert request.future.result(5) == "answer"
    assert job.future.result(5) == "batch after 2 runs"
    assert seen == ["batch", "request", "batch"] and runs == ["", ""]
    worker.close()


def test_a_requeued_job_cancelled_meanwhile_is_not_run_again() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def batch(_e: object, cancel: CancelToken) -> str:
        runs.append(1)
        started.set()
        release.wait(5)
        return "stopped" if cancel.cancelled else "whole"

    job = worker.submit(batch, kind=JobKind.BATCH)
    assert started.wait(5)
    request = worker.submit(lambda e, c: "answer")
    assert job.cancel.cancelled  # paused
    job.cancel.cancel("caller gave up")  # a caller's cancel wins over the requeue
    release.set()
    assert job.future.result(5) == "stopped" and job.cancel.reason == "caller gave up"
    assert request.future.result(5) == "answer"
    time.sleep(0.1)
    assert runs == [1]
    worker.close()


def test_batch_work_waits_while_the_warmer_has_work_and_does_not_stop_it() -> None:
    warmer = _IdleWarmer(steps=3)
    worker = EngineWorker(FakeEngine, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    assert warmer.started.wait(5)
    job = worker.submit(lambda e, c: warmer.ran, kind=JobKind.BATCH)
    assert job.future.result(5) == 3  # every idle step first
    assert warmer.cancelled == 0
    worker.close()


def _stoppable(started: threading.Event, runs: list[str]):  # type: ignore[no-untyped-def]
    """A batch job that runs until stopped (or 0.2 s); each run says when it started."""

    def batch(_e: object, cancel: CancelToken) -> str:
        runs.append("run")
        started.set()
        for _ in range(20):
            if cancel.cancelled:
                return "stopped"
            time.sleep(0.01)
        return f"done after {len(runs)} runs"

    return batch


def test_making_way_stops_batch_work_at_once_and_holds_it_until_the_request_is_submitted() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    started, runs = threading.Event(), []
    job = worker.submit(_stoppable(started, runs), kind=JobKind.BATCH)
    assert started.wait(5)
    release = worker.make_way()
    assert job.cancel.cancelled  # paused while the request is read, before it is submitted
    time.sleep(0.3)
    assert runs == ["run"] and not job.future.done()  # requeued, and held back meanwhile
    request = worker.submit(lambda e, c: list(runs))
    release()
    release()  # idempotent
    assert request.future.result(5) == ["run"]  # the request ran before the batch resumed
    assert job.future.result(5) == "done after 2 runs"
    worker.close()


def test_a_released_way_with_no_request_lets_held_work_resume() -> None:
    warmer = _IdleWarmer(steps=1000)
    worker = EngineWorker(FakeEngine, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    assert warmer.started.wait(5)
    release = worker.make_way()
    time.sleep(0.1)
    assert warmer.cancelled >= 1  # the idle step stopped too
    ran = warmer.ran
    time.sleep(0.3)
    assert warmer.ran == ran  # and none started while the way was held
    release()  # the request was refused before it reached the engine
    time.sleep(0.3)
    assert warmer.ran > ran
    worker.close()


def test_making_way_for_a_request_leaves_another_request_running() -> None:
    worker = EngineWorker(FakeEngine)  # type: ignore[arg-type]
    started = threading.Event()
    first = worker.submit(_held(started))
    assert started.wait(5)
    release = worker.make_way()
    assert not first.cancel.cancelled
    release()
    first.cancel.cancel()
    with pytest.raises(Cancelled):
        first.future.result(5)
    worker.close()


class _Busy:
    def __init__(self) -> None:
        self.depth = 0
        self.entered = 0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.depth += 1
            self.entered += 1

    def exit(self) -> None:
        with self.lock:
            self.depth -= 1


def test_indexing_steps_aside_for_every_job_and_idle_step() -> None:
    busy, warmer = _Busy(), _IdleWarmer(steps=2)
    worker = EngineWorker(FakeEngine, busy=busy, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    assert worker.submit(lambda e, c: busy.depth).future.result(5) == 1
    assert worker.submit(lambda e, c: busy.depth, kind=JobKind.PREFETCH).future.result(5) == 1
    deadline = time.monotonic() + 5
    while (warmer.ran < 2 or busy.depth) and time.monotonic() < deadline:
        time.sleep(0.01)  # the last idle step takes 0.2 s, longer on a loaded machine
    assert busy.depth == 0 and busy.entered == 2 + warmer.ran
    worker.close()
