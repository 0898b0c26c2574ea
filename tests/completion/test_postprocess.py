"""Cleaning finished generations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fimble.completion.postprocess import clean_completion, trim_suffix_overlap, whole_lines
from fimble.completion.stops import StopContext


@pytest.mark.parametrize(
    ("text", "line_prefix", "line_suffix", "expected"),
    [
        ("dt.date(y, m, d))", "    dates.append(", ")", "dt.date(y, m, d)"),
        ("dt.date(y, m, d)", "    dates.append(", ")", "dt.date(y, m, d)"),
        ('hello")', 'print("', '")', "hello"),
        ("1, 2]", "xs = [", "]", "1, 2"),
        ("x + 1", "y = ", "", "x + 1"),
        ("foo", "bar(", ")", "foo"),
        # The ")" after the cursor closes a bracket opened on a line above: the suggestion's own
        # closers stay.
        ("foo(bar(x))", "    value=", ")", "foo(bar(x))"),
        ("max(b, min(c, d))", "\t       a, ", ");", "max(b, min(c, d))"),
        ("foo(bar(x)));", "\t\twrap(", ");", "foo(bar(x))"),
    ],
)
def test_trim_suffix_overlap(text: str, line_prefix: str, line_suffix: str, expected: str) -> None:
    assert trim_suffix_overlap(text, line_prefix, line_suffix) == expected


def test_clean_strips_trailing_whitespace() -> None:
    c = StopContext(line_prefix="x = ", suffix="\n", multiline=False)
    assert clean_completion("1   \n", c) == "1"


def test_whole_lines_keeps_only_finished_lines() -> None:
    assert whole_lines("a = 1\nb = 2\nc = ") == "a = 1\nb = 2"
    assert whole_lines("unfinished") == ""
    assert whole_lines("\n    x = 1\n    y") == "\n    x = 1"


def test_clean_gives_the_documents_line_ends() -> None:
    c = StopContext(line_prefix="def f():", suffix="\r\n", multiline=True, block_indent=1)
    for generated in ("\n    a = 1\n\n    return a\n", "\r\n    a = 1\r\n\r\n    return a\r\n"):
        assert clean_completion(generated, c) == "\r\n    a = 1\r\n\r\n    return a"
    assert clean_completion("\r\n    return a\r\n", replace(c, suffix="\n")) == "\n    return a"
