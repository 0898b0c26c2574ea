"""The engine worker: one job at a time, supersede by key, cancel, load failures kept."""

from __future__ import annotations

import threading
import time

import pytest

from fimble.completion.cancel import CancelToken
from fimble.completion.worker import EngineWorker
from fimble.errors import Cancelled, ModelNotFound


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
    engine = FakeEngine()
    engine.warmer = warmer  # type: ignore[attr-defined]
    worker = EngineWorker(lambda: engine)  # type: ignore[arg-type, return-value]
    assert worker.submit(lambda e, c: 1).future.result(5) == 1
    assert warmer.started.wait(5)  # idle time went to the warmer
    assert worker.submit(lambda e, c: 2).future.result(5) == 2
    assert warmer.cancelled >= 1
    worker.close()


def test_idle_work_stops_when_the_warmer_has_nothing_left() -> None:
    warmer = _IdleWarmer(steps=2)
    engine = FakeEngine()
    engine.warmer = warmer  # type: ignore[attr-defined]
    worker = EngineWorker(lambda: engine)  # type: ignore[arg-type, return-value]
    worker.submit(lambda e, c: 1).future.result(5)
    time.sleep(0.8)
    assert warmer.ran == 2
    worker.close()
