"""The Completer over a fake engine: stats, typed-through answers, and what they cancel."""

from __future__ import annotations

import threading

from fimble.completion.completer import Completer
from fimble.completion.engine import Generation
from fimble.completion.fim import FimTokens
from fimble.completion.service import CompletionRequest


class FakeEngine:
    """Tokenizes by character and always answers ``answer``; counts its generations."""

    fim = FimTokens(family="test", prefix=1, suffix=2, middle=3, stop=frozenset())

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def generate(self, prompt: list[int], **_: object) -> Generation:
        self.calls += 1
        self.gate.wait(5)
        return Generation(self.answer, (9,) * len(self.answer), "eog", len(prompt), len(prompt), 0, 1.0, 1.0)

    def close(self) -> None:
        pass


def request(prefix: str, suffix: str = "\n") -> CompletionRequest:
    return CompletionRequest(text=prefix + suffix, offset=len(prefix), multiline=False)


def test_typing_through_a_suggestion_needs_no_model() -> None:
    engine = FakeEngine("append(x)")
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc").future.result(5)
    assert first.text == "append(x)" and engine.calls == 1
    typed = completer.submit(request("xs.app"), key="doc")
    assert typed.future.done()
    assert typed.future.result().text == "end(x)"
    assert typed.future.result().stop_reason == "typed_through"
    assert engine.calls == 1
    stats = completer.stats()
    assert stats.typed_through == 1 and stats.requests == 2
    completer.submit(request("xs.apx"), key="doc").future.result(5)  # typed something else
    assert engine.calls == 2
    completer.close()


def test_typed_through_answer_cancels_a_running_request_for_the_same_document() -> None:
    engine = FakeEngine("append(x)")
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    completer.submit(request("xs."), key="doc").future.result(5)
    engine.gate.clear()
    typo = completer.submit(request("xs.b"), key="doc")  # not the suggestion: the model runs (held)
    other = completer.submit(request("ys."), key="other")  # queued for another document
    typed = completer.submit(request("xs.a"), key="doc")  # backspace, then the suggestion's first char
    assert typed.future.result(0).text == "ppend(x)"
    assert typo.cancel.cancelled
    assert not other.cancel.cancelled
    engine.gate.set()
    assert other.future.result(5).text == "append(x)"
    completer.close()
