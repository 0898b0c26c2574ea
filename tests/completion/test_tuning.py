"""A client's settings travel with its requests: one client's choice never changes another's requests."""

from __future__ import annotations

from dataclasses import replace

from fimble.completion.completer import Completer
from fimble.completion.engine import Generation
from fimble.completion.service import CompletionRequest
from fimble.completion.tuning import Tuning
from tests.completion.test_completer import FakeEngine, request


class RecordingWarmer:
    """A warmer stub that records the first-prompt settings each request was planned with."""

    def __init__(self) -> None:
        self.last_small = False
        self.firsts: list[tuple[int, int] | None] = []

    def choose(self, engine: object, full: object, rebuild: object, **kw: object) -> object:
        self.firsts.append(kw.get("first"))  # type: ignore[arg-type]
        return full

    def observe(self, generation: Generation) -> None:
        pass

    def idle(self, engine: object, cancel: object) -> bool:
        return False  # nothing to warm


class RecordingEngine(FakeEngine):
    """Records the ``speculative`` each generation was asked for (absent: the engine's own)."""

    speculative = True

    def __init__(self, answer: str) -> None:
        super().__init__(answer)
        self.seen: list[object] = []

    def generate(self, prompt: list[int], **kw: object) -> Generation:
        self.seen.append(kw.get("speculative", "own"))
        return super().generate(prompt, **kw)


def _as(tuning: Tuning | None, prefix: str) -> CompletionRequest:
    return replace(request(prefix), tuning=tuning)


def test_each_request_runs_with_its_own_clients_tuning() -> None:
    engine = RecordingEngine("append(x)")
    warmer = RecordingWarmer()
    completer = Completer(
        load=lambda: engine,  # type: ignore[arg-type, return-value]
        warmup=lambda _engine: warmer,  # type: ignore[arg-type, return-value]
        prefetch=False,
    )
    quiet = Tuning(speculative=False, first_ms=0, first_tokens=100)
    completer.submit(_as(quiet, "a."), key="client-a").future.result(5)
    completer.submit(_as(Tuning(), "b."), key="client-b").future.result(5)
    completer.submit(_as(None, "c."), key="http").future.result(5)
    completer.submit(_as(quiet, "d."), key="client-a").future.result(5)
    assert engine.seen == [False, "own", "own", False]
    assert warmer.firsts == [(0, 100), (1600, 384), None, (0, 100)]
    assert engine.speculative is True  # nothing a client sent was written into the engine
    completer.close()
