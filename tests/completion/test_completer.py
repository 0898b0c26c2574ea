"""The Completer over a fake engine: stats, typed-through answers, and what they cancel."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from fimble.completion.cache import CacheConfig, Cached, CompletionCache
from fimble.completion.completer import BatchItem, Completer
from fimble.completion.engine import Generation
from fimble.completion.prompt.fim import FimTokens
from fimble.completion.service import CompletionRequest
from fimble.completion.typeahead import Flight
from fimble.errors import Cancelled


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


def test_an_answer_older_code_cached_on_disk_is_not_served_after_an_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk cache outlives the process: its keys carry a digest of the code that answers, so
    a changed stop rule or prompt is not hidden behind what the older code answered."""
    import fimble.completion.completer as completer_module

    cache = CompletionCache(CacheConfig(path=tmp_path))

    def answer(code: str, engine: FakeEngine) -> str:
        monkeypatch.setattr(completer_module, "answer_code_id", lambda: code)
        completer = Completer(load=lambda: engine, cache=cache, prefetch=False)  # type: ignore[arg-type, return-value]
        text = completer.submit(request("xs."), key="doc").future.result(5).text
        completer.close()
        return text

    assert answer("old", FakeEngine("append(x)")) == "append(x)"
    upgraded = FakeEngine("extend(y)")
    assert answer("new", upgraded) == "extend(y)" and upgraded.calls == 1
    again = FakeEngine("never")
    assert answer("new", again) == "extend(y)" and again.calls == 0  # the same code: from the cache


class StreamingEngine(FakeEngine):
    """Produces ``answer`` one character per step; ``step`` lets the test release characters."""

    def __init__(self, answer: str) -> None:
        super().__init__(answer)
        self.step = threading.Semaphore(0)
        self.produced = threading.Event()  # set after each character
        self.requests: list[list[int]] = []

    def generate(self, prompt: list[int], **kw: object) -> Generation:
        self.calls += 1
        self.requests.append(prompt)
        cancel, on_text = kw["cancel"], kw["on_text"]
        text = ""
        for ch in self.answer:
            while not self.step.acquire(timeout=0.01) or cancel.cancelled:  # type: ignore[attr-defined]
                if cancel.cancelled:  # type: ignore[attr-defined]
                    return Generation(text, (9,) * len(text), "cancelled", len(prompt), 1, 0, 1.0, 1.0)
            text += ch
            on_text(text)  # type: ignore[operator]
            self.produced.set()
        return Generation(text, (9,) * len(text), "eog", len(prompt), len(prompt), 0, 1.0, 1.0)


def _flight(completer: Completer, key: str) -> Flight:
    flight = completer.flights.get(key)
    assert flight is not None, f"no generation under way for {key}"
    return flight


def _running(completer: Completer, key: str) -> bool:
    flight = completer.flights.get(key)
    return flight is not None and flight.running


def _wait(predicate: object, timeout: float = 5.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.005)


def test_typing_what_the_running_generation_produces_waits_for_it() -> None:
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc")
    engine.step.release(3)  # "app" produced
    _wait(lambda: engine.produced.is_set() and _flight(completer, "doc").produced == "app")
    second = completer.submit(request("xs.ap"), key="doc")  # typed "ap": agrees with "app"
    first.cancel.cancel("cancelled")  # the editor drops the older request: the generation goes on
    assert not second.future.done()
    engine.step.release(100)
    assert second.future.result(5).text == "pend(x)"
    assert second.future.result().stop_reason == "adopted"
    assert first.future.result(5).text == "append(x)"
    assert engine.calls == 1 and completer.stats().adopted == 1
    completer.close()


def test_a_generation_that_went_elsewhere_is_run_again_for_the_newest_request() -> None:
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    completer.submit(request("xs."), key="doc")
    _wait(lambda: _running(completer, "doc"))
    # Nothing produced yet, so "e" agrees; the generation then produces "append(x)", not "e...".
    adopted = completer.submit(request("xs.e"), key="doc")
    engine.step.release(100)
    engine.answer = "xtend(ys)"
    assert adopted.future.result(5).text == "xtend(ys)"
    assert engine.calls == 2
    completer.close()


def test_typing_something_else_supersedes_the_generation_and_its_adopters() -> None:
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc")
    engine.step.release(2)
    _wait(lambda: _flight(completer, "doc").produced == "ap")
    adopted = completer.submit(request("xs.a"), key="doc")
    other = completer.submit(request("xs.b"), key="doc")  # disagrees: supersedes
    engine.step.release(1000)
    assert first.future.result(5).stop_reason == "cancelled"
    with pytest.raises(Cancelled):
        adopted.future.result(5)
    assert other.future.result(5).text == "append(x)"
    completer.close()


def test_cancelling_every_waiter_stops_the_generation() -> None:
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc")
    _wait(lambda: _running(completer, "doc"))
    second = completer.submit(request("xs.a"), key="doc")
    completer.cancel(first)
    completer.cancel(second, "deadline")
    assert first.future.result(5).stop_reason == "cancelled"
    with pytest.raises(Cancelled):
        second.future.result(5)  # nothing produced yet: nothing to keep
    completer.close()


def test_a_repeated_request_is_answered_from_the_cache() -> None:
    engine = FakeEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    completer.submit(request("xs."), key="doc").future.result(5)
    completer.submit(request("ys."), key="doc").future.result(5)  # elsewhere (no typed-through)
    again = completer.submit(request("xs."), key="doc")  # undo: the same text again
    assert again.future.done() and again.future.result().stop_reason == "cached"
    assert again.future.result().text == "append(x)"
    assert engine.calls == 2 and completer.stats().cache_hits == 1
    assert completer.submit(request("xs.app"), key="doc").future.result().stop_reason == "typed_through"
    changed = CompletionRequest(text="xs.\n", offset=3, multiline=False, max_tokens=8)
    completer.submit(changed, key="doc").future.result(5)  # other settings: not the same request
    assert engine.calls == 3
    completer.close()


class ColdThenWarm:
    """A warmer stub: the first ``cold`` prompts are small ones (a cold place), the rest full."""

    def __init__(self, cold: int) -> None:
        self.cold = cold
        self.last_small = False

    def choose(self, engine: object, full: object, rebuild: object, **_: object) -> object:
        self.last_small, self.cold = self.cold > 0, self.cold - 1
        return full

    def observe(self, generation: Generation) -> None:
        pass


def test_a_small_first_prompts_answer_is_not_the_answer_at_that_place_for_good(tmp_path: Path) -> None:
    """The cold answer (small prompt, no repository context) is shown but not cached, also not on
    disk: the same request once the full prompt is warm gets the full prompt's answer."""
    engine = ScriptedEngine("cold()", "cold()", "warm()", "other()")
    warmer = ColdThenWarm(cold=2)
    cache = CompletionCache(CacheConfig(path=tmp_path / "cache"))
    completer = Completer(load=lambda: engine, cache=cache, prefetch=False, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc").future.result(5)
    assert first.text == "cold()" and first.provisional
    completer.submit(request("ys."), key="doc").future.result(5)  # elsewhere, and cold too
    again = completer.submit(request("xs."), key="doc").future.result(5)
    assert again.stop_reason == "eog" and again.text == "warm()" and not again.provisional
    completer.submit(request("zs."), key="doc").future.result(5)
    cached = completer.submit(request("xs."), key="doc").future.result(5)
    assert cached.stop_reason == "cached" and cached.text == "warm()"
    assert engine.calls == 4
    completer.close()
    cache.close()


def test_the_same_small_prompt_again_is_answered_without_the_model_while_the_place_is_cold() -> None:
    """A focus starts a suggestion at a cold place (a small prompt); the keystroke that follows gets
    that answer without the model, as long as the warmer still picks the same small prompt."""
    engine = ScriptedEngine("cold()", "elsewhere()", "warm()")
    warmer = ColdThenWarm(cold=3)
    completer = Completer(load=lambda: engine, prefetch=False, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    assert completer.submit(request("xs."), key="a").future.result(5).text == "cold()"
    completer.submit(request("ys."), key="b").future.result(5)
    again = completer.submit(request("xs."), key="a").future.result(5)
    assert (again.text, again.stop_reason, again.provisional) == ("cold()", "cached", True)
    assert engine.calls == 2 and completer.stats().cache_hits == 1
    warm = completer.submit(request("xs."), key="a").future.result(5)  # the full prompt now
    assert (warm.text, warm.provisional) == ("warm()", False) and engine.calls == 3
    completer.close()


def test_an_invoked_request_at_a_cold_place_can_fall_back_on_the_small_prompts_answer() -> None:
    """``provisional`` gives what the small prompt answered at this very place (an invoked request
    there asks for the full prompt, which may not be read by its deadline), and nothing elsewhere."""
    engine = ScriptedEngine("cold()")
    warmer = ColdThenWarm(cold=1)
    completer = Completer(load=lambda: engine, prefetch=False, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    assert completer.provisional(request("xs.")) is None
    completer.submit(request("xs."), key="a").future.result(5)
    invoked = replace(request("xs."), full_prompt=True)
    assert completer.provisional(invoked) == Cached("cold()", False)
    assert completer.provisional(request("ys.")) is None
    completer.close()


def test_the_cache_survives_a_new_completer_on_the_same_directory(tmp_path: Path) -> None:
    def run() -> tuple[str, int]:
        engine = FakeEngine("append(x)")
        cache = CompletionCache(CacheConfig(path=tmp_path / "cache"))
        completer = Completer(load=lambda: engine, cache=cache, prefetch=False)  # type: ignore[arg-type, return-value]
        result = completer.submit(request("xs."), key="doc").future.result(5)
        completer.close()
        cache.close()
        return result.stop_reason, engine.calls

    assert run() == ("eog", 1)
    assert run() == ("cached", 0)


class ScriptedEngine(FakeEngine):
    def __init__(self, *answers: str) -> None:
        super().__init__("")
        self.answers = list(answers)

    def generate(self, prompt: list[int], **kw: object) -> Generation:
        self.answer = self.answers.pop(0)
        return super().generate(prompt, **kw)


def test_idle_prefetch_answers_the_line_after_an_accepted_suggestion() -> None:
    engine = ScriptedEngine(" = 1", "\ny = 2")
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    auto = CompletionRequest(text="x\n", offset=1)  # multi-line decided from the cursor
    assert completer.submit(auto, key="doc").future.result(5).text == " = 1"
    _wait(lambda: completer.stats().prefetched == 1)
    accepted = CompletionRequest(text="x = 1\n", offset=5)
    hit = completer.submit(accepted, key="doc")
    assert hit.future.done() and hit.future.result().text == "\ny = 2"
    assert (
        completer.submit(CompletionRequest(text="x = 1\ny\n", offset=7), key="doc").future.result().text
        == " = 2"
    )
    assert engine.calls == 2
    completer.close()


def test_prefetch_yields_to_any_request() -> None:
    engine = StreamingEngine(" = 1")
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    engine.step.release(4)
    completer.submit(CompletionRequest(text="x\n", offset=1), key="doc").future.result(5)
    _wait(lambda: engine.calls == 2)  # the prefetch is generating (held: no steps left)
    prefetch = completer.ahead.prefetching
    assert prefetch is not None
    engine.answer = "zz"
    job = completer.submit(CompletionRequest(text="q\n", offset=1), key="other")
    assert prefetch.cancel.cancelled
    assert prefetch.cancel.background  # so the engine stops even a short prompt evaluation
    engine.step.release(10)
    assert job.future.result(5).text == "zz"
    assert completer.stats().prefetched == 0
    completer.close()


def test_a_caller_may_stop_waiting_while_the_prompt_is_read_without_aborting_it() -> None:
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc")
    _wait(lambda: _running(completer, "doc"))
    assert completer.detach(first)  # nothing produced yet: runs on
    later = completer.submit(request("xs.a"), key="doc")  # the next keystroke waits for it
    engine.step.release(1)
    _wait(lambda: _flight(completer, "doc").produced == "a")
    assert not completer.detach(later)  # text produced: the caller takes what there is at once
    assert later.future.result(0).stop_reason == "cancelled"
    engine.step.release(100)
    assert first.future.result(5).stop_reason == "eog"  # ran to the end though nobody waited
    typed = completer.submit(request("xs.ap"), key="doc")  # and the next keystroke is answered
    assert typed.future.result(0).text == "pend(x)" and engine.calls == 1
    completer.close()


def test_nothing_to_show_until_the_first_line_is_finished() -> None:
    """What a request past its deadline waits for: while the prompt is read and while the first
    line is unfinished, cutting the generation would show nothing."""
    engine = StreamingEngine("ab\ncd\n")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    job = completer.submit(request("xs."), key="doc")
    _wait(lambda: _running(completer, "doc"))
    assert completer.nothing_to_show(job)  # the prompt is being read
    engine.step.release(2)
    _wait(lambda: _flight(completer, "doc").produced == "ab")
    assert completer.nothing_to_show(job)  # a first line under way, unfinished
    engine.step.release(2)
    _wait(lambda: _flight(completer, "doc").produced == "ab\nc")
    assert not completer.nothing_to_show(job)  # a whole line to show
    engine.step.release(100)
    job.future.result(5)
    assert not completer.nothing_to_show(job)  # landed
    completer.close()


def test_a_request_in_another_document_stops_a_prompt_read_on_for_nobody() -> None:
    """A caller that gave up at its deadline let its prompt be read on, for the next keystroke in
    that document; a request for another document means the user moved on: it is not kept
    waiting behind that reading."""
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="a.py")
    _wait(lambda: _running(completer, "a.py"))
    assert completer.detach(first)  # nobody waits for it now; it runs on
    elsewhere = completer.submit(request("ys."), key="b.py")
    assert first.future.result(5).stop_reason == "cancelled"  # stopped, not read to the end
    engine.step.release(100)
    assert elsewhere.future.result(5).text == "append(x)"
    completer.close()


def test_a_late_caller_takes_the_text_so_far_while_the_generation_goes_on_for_others() -> None:
    engine = StreamingEngine("append(x)\n")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc")
    engine.step.release(4)
    _wait(lambda: _flight(completer, "doc").produced == "appe")
    later = completer.submit(request("xs.a"), key="doc")  # adopts
    assert not completer.detach(later)  # its deadline: text produced, the first still waits
    assert later.future.done() and later.future.result().text == "ppe"
    assert later.future.result().stop_reason == "cancelled" and later.cancel.reason == "deadline"
    engine.step.release(100)
    assert first.future.result(5).text == "append(x)" and engine.calls == 1
    completer.close()


def test_warming_where_the_cursor_went_answers_the_first_keystroke_without_the_model() -> None:
    engine = FakeEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    completer.wait_ready(5)
    assert completer.warm_at(request("xs."), "doc")
    _wait(lambda: engine.calls == 1 and completer.flights.get("doc") is None)
    assert not completer.warm_at(request("xs."), "doc")  # known already: nothing to do
    typed = completer.submit(request("xs.a"), key="doc")
    assert typed.future.result(5).stop_reason == "typed_through"
    assert typed.future.result().text == "ppend(x)"
    assert engine.calls == 1 and completer.stats().warmed == 1
    completer.close()


def test_a_keystroke_at_the_warmed_place_waits_for_the_warming_generation() -> None:
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    completer.wait_ready(5)
    assert completer.warm_at(request("xs."), "doc")
    _wait(lambda: _running(completer, "doc"))
    assert not completer.warm_at(request("xs."), "doc")  # already under way
    same = completer.submit(request("xs."), key="doc")  # the editor asks where the cursor went
    typed = completer.submit(request("xs.ap"), key="doc")  # and the user types on
    engine.step.release(100)
    assert typed.future.result(5).text == "pend(x)"
    assert typed.future.result().stop_reason == "adopted"
    assert engine.calls == 1
    assert same.future.result(5).text == "append(x)"  # answered too (its front door drops it: stale)
    completer.close()


def test_warming_from_the_completion_cache_needs_no_model() -> None:
    engine = FakeEngine("append(x)")
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    completer.submit(request("xs."), key="a").future.result(5)
    assert not completer.warm_at(request("xs."), "b")  # another document, same text: cached
    assert completer.submit(request("xs.ap"), key="b").future.result(5).stop_reason == "typed_through"
    assert engine.calls == 1
    completer.close()


def block(prefix: str) -> CompletionRequest:
    return CompletionRequest(text=prefix + "\n", offset=len(prefix), multiline=True)


def test_a_keystroke_joining_a_block_gets_its_finished_lines_at_once() -> None:
    engine = StreamingEngine("    a = 1\n    b = 2\n    c = 3")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    completer.wait_ready(5)
    assert completer.warm_at(block("def f():\n"), "doc")
    engine.step.release(len("    a = 1\n    b"))
    _wait(lambda: _flight(completer, "doc").produced == "    a = 1\n    b")
    typed = completer.submit(block("def f():\n    a"), key="doc")
    answer = typed.future.result(0)  # no token more needed: the first line is done
    assert answer.text == " = 1" and answer.stop_reason == "adopted_lines"
    later = completer.submit(block("def f():\n    a = 1\n"), key="doc")  # accepted, asks again
    assert not later.future.done()  # "    b" is not a whole line yet
    engine.step.release(len(" = 2\n"))
    assert later.future.result(5).text == "    b = 2"
    engine.step.release(100)  # the block goes on for the type-ahead: the rest without the model
    _wait(lambda: completer.flights.get("doc") is None)
    rest = completer.submit(block("def f():\n    a = 1\n    b = 2\n"), key="doc")
    assert rest.future.result(0).text == "    c = 3"
    assert rest.future.result().stop_reason == "typed_through"
    assert engine.calls == 1
    completer.close()


def test_lines_taken_early_are_cleaned_like_the_final_text() -> None:
    """In a CRLF file the early lines get the file's line ends, as the finished suggestion would."""
    engine = StreamingEngine("    a = 1\n    b = 2\n    c = 3")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    completer.wait_ready(5)

    def crlf(prefix: str) -> CompletionRequest:
        return CompletionRequest(text=prefix + "\r\n", offset=len(prefix), multiline=True)

    assert completer.warm_at(crlf("def f():\r\n"), "doc")
    engine.step.release(len("    a = 1\n    b = 2\n    c"))
    _wait(lambda: _flight(completer, "doc").produced.endswith("    c"))
    joined = completer.submit(crlf("def f():\r\n    a"), key="doc").future.result(0)
    assert joined.stop_reason == "adopted_lines" and joined.text == " = 1\r\n    b = 2"
    engine.step.release(100)
    completer.close()


def test_the_request_writing_a_block_can_take_its_finished_lines_and_leave_it_running() -> None:
    """What a request past ``firstSuggestionMs`` takes (``lines_so_far``): the whole lines so far,
    cleaned; the block is written on and then answers the next keystrokes without the model."""
    engine = StreamingEngine("    a = 1\n    b = 2\n    c = 3")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    asked = block("def f():\n")
    job = completer.submit(asked, key="doc")
    engine.step.release(len("    a"))
    _wait(lambda: _flight(completer, "doc").produced == "    a")
    assert completer.lines_so_far(job, asked) is None  # the first line is unfinished
    engine.step.release(len(" = 1\n    b"))
    _wait(lambda: _flight(completer, "doc").produced == "    a = 1\n    b")
    early = completer.lines_so_far(job, asked)
    assert early is not None and early.text == "    a = 1" and early.stop_reason == "adopted_lines"
    engine.step.release(100)  # nobody waits for the block now, and it is not stopped
    assert job.future.result(5).text == "    a = 1\n    b = 2\n    c = 3"
    rest = completer.submit(block("def f():\n    a = 1\n"), key="doc")
    assert rest.future.result(0).text == "    b = 2\n    c = 3"
    assert rest.future.result().stop_reason == "typed_through" and engine.calls == 1
    completer.close()


def test_a_one_line_request_whose_statement_goes_on_can_take_its_first_line() -> None:
    """``constructor() {`` at a line start asked for one line: the generation writes on until the
    brace closes (up to 12 lines), and its first line is whole long before that."""
    engine = StreamingEngine("append(\n    x,\n)\n")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    asked = request("xs.")
    job = completer.submit(asked, key="doc")
    engine.step.release(len("append(\n  "))
    _wait(lambda: _flight(completer, "doc").produced == "append(\n  ")
    early = completer.lines_so_far(job, asked)
    assert early is not None and early.text == "append(" and not early.multiline
    engine.step.release(100)
    assert job.future.result(5).text == "append(\n    x,\n)"
    completer.close()


def test_a_block_answered_early_stops_for_a_request_in_another_document() -> None:
    engine = StreamingEngine("    a = 1\n    b = 2\n    c = 3")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    asked = block("def f():\n")
    job = completer.submit(asked, key="doc")
    engine.step.release(len("    a = 1\n"))
    _wait(lambda: _flight(completer, "doc").produced == "    a = 1\n")
    assert completer.lines_so_far(job, asked) is not None
    other = completer.submit(request("xs."), key="other")
    engine.step.release(100)
    assert job.future.result(5).stop_reason == "cancelled"
    assert other.future.result(5).text
    completer.close()


def test_a_one_line_generation_is_never_answered_early() -> None:
    engine = StreamingEngine("append(x)\n")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(request("xs."), key="doc")
    engine.step.release(3)
    _wait(lambda: _flight(completer, "doc").produced == "app")
    second = completer.submit(request("xs.a"), key="doc")
    assert not second.future.done()
    engine.step.release(100)
    assert second.future.result(5).stop_reason == "adopted"
    first.future.result(5)
    completer.close()


def test_focus_where_the_user_typed_into_a_running_generation_leaves_it_alone() -> None:
    engine = StreamingEngine("append(x)")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    completer.wait_ready(5)
    assert completer.warm_at(request("xs."), "doc")
    engine.step.release(1)
    _wait(lambda: _flight(completer, "doc").produced == "a")
    typed = completer.submit(request("xs.ap"), key="doc")  # adopts the focus generation
    # The editor says the cursor rests after the typed text: the generation under way answers
    # there, so nothing starts (a new flight would cancel the request waiting on this one).
    assert not completer.warm_at(request("xs.ap"), "doc")
    engine.step.release(100)
    assert typed.future.result(5).text == "pend(x)"
    assert engine.calls == 1
    completer.close()


class BatchingEngine(FakeEngine):
    """Has batch slots: answers each batched prompt with its length; ``pause_once`` makes the
    first batch stop after its first prompt, as a keystroke's request does (``Decision.REQUEUE``)."""

    def __init__(self) -> None:
        super().__init__("alone")
        self.batch_slots = [object()]
        self.batches: list[list[list[int]]] = []
        self.guides: list[object] = []
        self.pause_once = False

    def generate_batch(self, prompts: list[list[int]], **kw: object) -> list[Generation]:
        self.batches.append(prompts)
        self.guides.append(kw["guides"])
        on_done, cancel = kw["on_done"], kw["cancel"]
        assert kw["keep_interactive"] is True  # a server keeps the editor's KV cells
        out = []
        for i, p in enumerate(prompts):
            stopped = self.pause_once and i > 0
            gen = Generation(
                f"len{len(p)}", (9,), "cancelled" if stopped else "eog", len(p), len(p), 0, 1.0, 1.0
            )
            if i == 0 and self.pause_once:
                cancel.pause()  # type: ignore[attr-defined]
            on_done(i, gen)  # type: ignore[operator]
            out.append(gen)
        self.pause_once = False
        return out


class CountingGuide:
    """Stands for an import guide: ``fresh`` is what a run must call before using it."""

    def __init__(self) -> None:
        self.fresh_ones: list[object] = []

    def fresh(self) -> object:
        self.fresh_ones.append(object())
        return self.fresh_ones[-1]


def _items(*texts: str, guide: tuple[int, CountingGuide] | None = None) -> list[BatchItem]:
    return [
        BatchItem(
            lambda e, t=t: e.tokenize(t),  # type: ignore[misc]
            max_tokens=4,
            guide=guide[1] if guide is not None and guide[0] == i else None,  # type: ignore[arg-type]
        )
        for i, t in enumerate(texts)
    ]


def test_a_batch_decodes_all_its_items_together_a_guided_one_with_a_fresh_guide() -> None:
    engine = BatchingEngine()
    guide = CountingGuide()
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    gens = completer.submit_batch(_items("ab", "cde", "f", guide=(1, guide))).future.result(5)
    assert [g.text for g in gens] == ["len2", "len3", "len1"]  # in the items' order
    assert engine.batches == [[[97, 98], [99, 100, 101], [102]]] and engine.calls == 0
    assert engine.guides == [[None, guide.fresh_ones[0], None]]
    completer.close()


def test_a_batch_stopped_for_a_request_runs_again_without_what_had_finished() -> None:
    engine = BatchingEngine()
    engine.pause_once = True
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    guide = CountingGuide()
    gens = completer.submit_batch(_items("ab", "cde", guide=(1, guide))).future.result(5)
    assert [g.text for g in gens] == ["len2", "len3"]
    assert engine.batches == [[[97, 98], [99, 100, 101]], [[99, 100, 101]]]
    assert engine.guides == [[None, guide.fresh_ones[0]], [guide.fresh_ones[1]]]  # a fresh guide again
    completer.close()


def test_without_batch_slots_the_items_run_one_after_the_other_in_one_job() -> None:
    engine = FakeEngine("one")
    completer = Completer(load=lambda: engine)  # type: ignore[arg-type, return-value]
    gens = completer.submit_batch(_items("ab", "c")).future.result(5)
    assert [g.text for g in gens] == ["one", "one"] and engine.calls == 2
    completer.close()


def test_an_invoked_request_typed_into_a_cold_suggestion_reads_the_full_prompt() -> None:
    """Typing into a small prompt's suggestion keeps it for automatic requests (it does not change
    under the user's typing); an invoked one there asks the model, as it would with nothing shown."""
    engine = ScriptedEngine("append(x)", "append(y)")
    warmer = ColdThenWarm(cold=1)
    completer = Completer(load=lambda: engine, prefetch=False, warmup=lambda _e: warmer)  # type: ignore[arg-type, return-value]
    assert completer.submit(request("xs."), key="a").future.result(5).provisional
    typed = completer.submit(request("xs.app"), key="a").future.result(5)
    assert (typed.text, typed.stop_reason) == ("end(x)", "typed_through")
    invoked = completer.submit(replace(request("xs.app"), full_prompt=True), key="a").future.result(5)
    assert invoked.stop_reason != "typed_through" and not invoked.provisional and engine.calls == 2
    completer.close()
