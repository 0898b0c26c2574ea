"""Stop rules over the text generated so far."""

from __future__ import annotations

from fimble.completion.stops import (
    StopContext,
    first_line_stop,
    indent_stop,
    make_stop_check,
    suffix_repeat_stop,
)


def ctx(line_prefix: str = "", suffix: str = "", multiline: bool = False) -> StopContext:
    return StopContext(line_prefix=line_prefix, suffix=suffix, multiline=multiline)


def test_single_line_stops_at_newline_after_content() -> None:
    assert first_line_stop("foo(1)", ctx()) is None
    assert first_line_stop("foo(1)\n", ctx()) == ("newline", 6)
    assert first_line_stop("foo(1)\nbar", ctx()) == ("newline", 6)


def test_single_line_lets_a_suggestion_start_on_the_next_line() -> None:
    assert first_line_stop("\n    return x", ctx()) is None
    assert first_line_stop("\n    return x\n", ctx()) == ("newline", 13)


def test_multiline_ignores_newlines() -> None:
    assert first_line_stop("a\nb\n", ctx(multiline=True)) is None


def test_suffix_repeat() -> None:
    c = ctx(suffix="\n    return dates\n", multiline=True)
    assert suffix_repeat_stop("x = 1\n    return dates\n", c) == ("stop_rule:suffix_repeat", 5)
    assert suffix_repeat_stop("x = 1\n    return da", c) is None


def test_indent_leaving_block() -> None:
    c = ctx(line_prefix="    ", multiline=True)
    assert indent_stop("x = 1\n    y = 2\n", c) is None
    assert indent_stop("x = 1\n    y = 2\ndef g():\n", c) == ("stop_rule:indent", 15)


def test_make_stop_check_runs_rules_in_order() -> None:
    check = make_stop_check(ctx())
    assert check("abc") is None
    assert check("abc\n") == ("newline", 3)
