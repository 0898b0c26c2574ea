"""One line or a block is decided once per request, and the cache key, the flight and the result agree.

The case pinned is one where the old text heuristic (which keyed the cache and shaped the flight)
and tree-sitter (which shaped the result) disagreed: a Python comment ending in a colon.
"""

from __future__ import annotations

from fimble.completion.completer import Completer
from fimble.completion.output.shape import text_heuristic
from fimble.completion.service import CompletionRequest, shape_of
from tests.completion.test_completer import FakeEngine, StreamingEngine, _flight, _running, _wait

LINE = "x = 1  # steps:"
SUFFIX = "\n"


def comment(typed: str = "") -> CompletionRequest:
    prefix = LINE + typed
    return CompletionRequest(text=prefix + SUFFIX, offset=len(prefix), path="a.py")


def test_the_pinned_case_is_one_where_heuristic_and_tree_sitter_disagree() -> None:
    assert text_heuristic(LINE, SUFFIX) == (True, "line opens a block")
    syntax = shape_of(comment())
    assert (syntax.multiline, syntax.reason) == (False, "inside a comment")


def test_without_a_grammar_the_text_heuristic_decides() -> None:
    plain = CompletionRequest(text=LINE + SUFFIX, offset=len(LINE), path="notes.unknown-ext")
    assert shape_of(plain).multiline is True


def test_a_forced_shape_wins_over_the_syntax() -> None:
    forced = CompletionRequest(text=LINE + SUFFIX, offset=len(LINE), path="a.py", multiline=True)
    assert (shape_of(forced).multiline, shape_of(forced).reason) == (True, "always")


def test_the_flight_and_the_result_share_the_decision_and_an_adopter_gets_no_early_lines() -> None:
    """The old flight, shaped by the heuristic, was a block: a keystroke joining it got its whole
    lines at once (``adopted_lines``), though the result is one line. Now it waits for the line."""
    engine = StreamingEngine(" a\nb\n")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    first = completer.submit(comment(), key="doc")
    _wait(lambda: _running(completer, "doc"))
    assert _flight(completer, "doc").multiline is False
    engine.step.release(3)  # " a\n": a whole line
    _wait(lambda: _flight(completer, "doc").produced == " a\n")
    joined = completer.submit(comment(" "), key="doc")
    assert not joined.future.done()  # no early lines from a one-line generation
    engine.step.release(100)
    result = first.future.result(5)
    assert result.multiline is False and result.shape == "inside a comment"
    answer = joined.future.result(5)
    assert answer.stop_reason == "adopted" and answer.multiline is False
    completer.close()


def test_the_cache_key_is_made_with_the_same_decision() -> None:
    engine = FakeEngine(" one")
    completer = Completer(load=lambda: engine, prefetch=False)  # type: ignore[arg-type, return-value]
    request = comment()
    assert completer.submit(request, key="doc").future.result(5).multiline is False
    key = completer._cache_key(request, shape_of(request))
    assert key is not None and (found := completer.cache.get(key)) is not None
    assert found[0].multiline is False
    forced = CompletionRequest(request.text, request.offset, multiline=True)
    block = completer._cache_key(request, shape_of(forced))
    assert block != key  # what the heuristic would have keyed it as is another entry
    again = completer.submit(request, key="other").future.result(5)
    assert again.stop_reason == "cached" and engine.calls == 1
    completer.close()
