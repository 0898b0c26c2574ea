"""Cleaning finished generations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fimble.completion.output.postprocess import (
    clean_completion,
    finished_lines,
    fit_line_start,
    trim_suffix_overlap,
    whole_lines,
)
from fimble.completion.output.stops import StopContext


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


def test_finished_lines_are_read_from_the_raw_text_not_the_cleaned_one() -> None:
    assert (
        finished_lines('return "Hello World"', 'return "Hello World"\n\n    rv = app')
        == 'return "Hello World"'
    )
    assert finished_lines("a = 1\n    b", "a = 1\n    b") == "a = 1"
    assert finished_lines('return "Hel', 'return "Hel') == ""
    assert finished_lines("a = 1", "a = 1\n") == "a = 1"


def test_whole_lines_keeps_only_finished_lines() -> None:
    assert whole_lines("a = 1\nb = 2\nc = ") == "a = 1\nb = 2"
    assert whole_lines("unfinished") == ""
    assert whole_lines("\n    x = 1\n    y") == "\n    x = 1"


def test_clean_gives_the_documents_line_ends() -> None:
    c = StopContext(line_prefix="def f():", suffix="\r\n", multiline=True, block_indent=1)
    for generated in ("\n    a = 1\n\n    return a\n", "\r\n    a = 1\r\n\r\n    return a\r\n"):
        assert clean_completion(generated, c) == "\r\n    a = 1\r\n\r\n    return a"
    assert clean_completion("\r\n    return a\r\n", replace(c, suffix="\n")) == "\n    return a"


def at(line_prefix: str, suffix: str, above: str, grammar: bool = True) -> StopContext:
    """A cursor in the leading whitespace of a line, as ``shape.stop_context`` describes it."""
    return StopContext(line_prefix, suffix, False, open_brackets="" if grammar else None, above=above)


@pytest.mark.parametrize(
    ("c", "text", "expected"),
    [
        # One tab more than the cursor's (the tokens of a prompt ending in tabs), or all of them again.
        (at("\t\t", "\n\t}\n", "\t\tconst a = f();\n"), "\tg(a);", "g(a);"),
        (at("\t", "\n}\n", "\tlet a = 1;\n"), "\tg(a);", "g(a);"),
        (at("", "\n\treturn a;\n", "\tlet a = 1;\n"), "\t\tg(a);", "\tg(a);"),
        # The level a header opens is not one too many; nor is a Makefile recipe's tab.
        (at("\t", "\n\t}\n", "\tif (ok) {\n"), "\tnotify();", "\tnotify();"),
        (at("", "\n", "app: main.o\n", grammar=False), "\t$(CC) -o app main.o", "\t$(CC) -o app main.o"),
        (at("\t", "\n", "app: main.o\n", grammar=False), "\t$(CC) -o app main.o", "$(CC) -o app main.o"),
        # Indentation the line needs, from the whitespace after the cursor or the block around it.
        (at("  ", "  \n    return x\n", "    x = 1\n"), "y = 2", "  y = 2"),
        (at("", "\n    return x\n", "    x = 1\n"), "y = 2", "    y = 2"),
        (at("", "\n\t}\n", "\tif (ok) {\n\t\tf();\n"), "g();", "\t\tg();"),
        # A dedent, a closing bracket, a continuation: left where the model put them.
        (at("", "\n    return s\n", "    if x:\n        s = 1\n"), "    else:", "    else:"),
        (at("", "\n}\n", "\t\tf();\n"), "\t}", "\t}"),
        (at("\t", "\n", "\tconst xs = items\n"), "\t.map(f);", "\t.map(f);"),
        (at("\t", "\n", "\tconst total = compute(\n"), "\t\t\tx,", "\t\t\tx,"),
        # A case of a switch sits at the switch's level; a comment line is fitted like code; ``i++``
        # ends its statement.
        (at("\t", "\n\t\treturn\n", "\tselect {\n"), "case <-done:", "case <-done:"),
        (at("\t\t", "\n\t\tf()\n", "\t\tx := 1\n"), "\t// then f", "// then f"),
        (at("\t", "\t\n\t\tf(x)\n", "\tfor _, x := range xs {\n\t\tx *= 2\n"), "x++", "\tx++"),
        # In a string or a comment the writer indents; not at the start of a line; a suggestion that
        # starts on the next line.
        (replace(at("", "\n    y = 1\n", "    x = 1\n"), prose=True), "text", "text"),
        (at("\tx = ", "\n", "\tlet y = 1;\n"), "\t1;", "\t1;"),
        (at("\t", "\n}\n", "\tlet a = 1;\n"), "\n\t\tg(a);", "\n\t\tg(a);"),
    ],
)
def test_fit_line_start(c: StopContext, text: str, expected: str) -> None:
    assert fit_line_start(text, c) == expected


def test_fit_line_start_moves_the_next_lines_only_when_written_relative_to_the_first() -> None:
    c = at("", "\n}\n", "\tif (n < 0) {\n\t\tn = 0;\n\t}\n")
    # The whole block a level too deep: all of it moves.
    deep = "\t\tif (n > 9) {\n\t\t\tn = 9;\n\t\t}\n\t\treturn n;"
    assert fit_line_start(deep, c) == "\tif (n > 9) {\n\t\tn = 9;\n\t}\n\treturn n;"
    # Only the first line restated the cursor's tab: the others are already right.
    c = at("\t", "\n}\n", "\tif (n < 0) {\n\t\tn = 0;\n\t}\n")
    restated = "\tif (n > 9) {\n\t\tn = 9;\n\t}\n\treturn n;"
    assert fit_line_start(restated, c) == "if (n > 9) {\n\t\tn = 9;\n\t}\n\treturn n;"
