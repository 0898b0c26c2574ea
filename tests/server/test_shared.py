"""The process-wide completer and its model switch, with fake engines (no model): the old engine is
stopped and gone before the new one loads, and requests after the switch reach the new one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fimble.completion.completer import Completer
from fimble.completion.engine import Generation
from fimble.completion.engine.cancel import CancelToken
from fimble.errors import Cancelled
from fimble.server.shared import SharedCompleter


class _Engine:
    """Records its life in ``events``; ``close`` takes a while, as freeing a llama.cpp model does."""

    warmer = None
    model_path = None

    def __init__(self, name: str, events: list[str]) -> None:
        self.name = name
        self.events = events
        events.append(f"load {name}")

    def generate(self, tokens: list[int], **_: object) -> Generation:
        return Generation(self.name, (), "max_tokens", len(tokens), len(tokens), 0, 0.0, 0.0)

    def close(self) -> None:
        time.sleep(0.2)
        self.events.append(f"close {self.name}")


def _shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SharedCompleter, list[str]]:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path))
    events: list[str] = []

    def factory(model: str | None, threads: int, after: Callable[[], object] | None) -> Completer:
        name = f"{model}/{threads}"

        def load() -> Any:
            return _Engine(name, events)

        return Completer(model, threads=threads, load=load, after=after)

    return SharedCompleter("m", 2, factory=factory), events


def _answer(shared: SharedCompleter) -> str:
    return shared.submit_tokens([1, 2, 3], max_tokens=4).future.result(5).text


def test_a_switch_loads_the_new_model_only_once_the_old_one_is_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared, events = _shared(tmp_path, monkeypatch)
    assert shared.wait_ready(5) and _answer(shared) == "m/2"
    old = shared.ensure("m", 1)
    assert old is not None and shared.generation == 1
    assert shared.wait_ready(5)
    assert events == ["load m/2", "close m/2", "load m/1"]  # never two engines at once
    assert _answer(shared) == "m/1"
    old.close()  # what the LSP handler still does, off the event loop: nothing left to wait for
    assert shared.ensure("m", 1) is None
    shared.close()
    assert events[-1] == "close m/1"


def test_a_switch_cancels_the_old_engines_running_work_before_the_new_one_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared, events = _shared(tmp_path, monkeypatch)
    assert shared.wait_ready(5)
    started = threading.Event()

    def long_work(_engine: object, cancel: CancelToken) -> None:
        started.set()
        while not cancel.cancelled:  # a warm-up or a generation: stops at the next step
            time.sleep(0.01)
        events.append("old work stopped")
        raise Cancelled(cancel.reason)

    job = shared.current.worker.submit(long_work)
    assert started.wait(5)
    shared.ensure("other", 2)  # returns at once: the event loop never waits for the old engine
    assert events[-1] == "load m/2"
    assert shared.wait_ready(5)
    with pytest.raises(Cancelled):
        job.future.result(5)
    assert events == ["load m/2", "old work stopped", "close m/2", "load other/2"]
    shared.close()


def test_a_model_replaced_before_it_started_loading_is_never_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two quick switches: the middle model waits for the first to be freed, then is already stopped."""
    shared, events = _shared(tmp_path, monkeypatch)
    assert shared.wait_ready(5)
    shared.ensure("b", 2)
    shared.ensure("c", 2)
    assert shared.wait_ready(5) and _answer(shared) == "c/2"
    assert events == ["load m/2", "close m/2", "load c/2"]
    shared.close()
