"""Stop rules over the text generated so far."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fimble.completion.output.stops import (
    StopContext,
    bracket_stop,
    first_line_stop,
    indent_stop,
    make_stop_check,
    quote_stop,
    repetition_stop,
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


def test_the_earliest_cut_wins_when_one_token_trips_two_rules() -> None:
    c = StopContext(
        line_prefix='f("',
        suffix='")\n',
        multiline=False,
        open_brackets="(",
        closed_in_suffix=1,
        string_quote='"',
    )
    assert make_stop_check(c)('hi")\n') == ("stop_rule:quote_balance", 2)


def test_bracket_rule_is_off_without_syntax_facts() -> None:
    assert bracket_stop("a))", ctx()) is None


def test_bracket_rule_counts_what_the_suffix_closes() -> None:
    c = StopContext(
        line_prefix="print(len(", suffix=")\n", multiline=False, open_brackets="((", closed_in_suffix=1
    )
    assert bracket_stop("items)", c) is None
    assert bracket_stop("items))", c) == ("stop_rule:bracket_balance", 6)
    assert bracket_stop('"))" + x)', c) is None  # brackets in the model's strings do not count


def test_a_line_that_closes_and_reopens_a_block_is_judged_whole() -> None:
    # At the start of ``      } catch (error) {`` inside ``try {``: the suffix closes every open brace.
    c = StopContext(
        line_prefix="      ", suffix="\n  x;\n}\n}\n", multiline=False, open_brackets="{{", closed_in_suffix=2
    )
    assert bracket_stop("}", c) is None  # the line may still reopen it: wait for its end
    assert bracket_stop("} catch (error) {", c) is None
    assert bracket_stop("} catch (error) {\n", c) is None
    assert bracket_stop("}\n", c) == ("stop_rule:bracket_balance", 0)  # the suffix's own brace
    assert bracket_stop("} catch (e) {}\n", c) == ("stop_rule:bracket_balance", 0)  # not left open
    # Reopened, its brace stands for the closed one: closing it again is the suffix's job.
    multi = StopContext(
        line_prefix="  ", suffix="\n  }\n}\n", multiline=True, open_brackets="{{", closed_in_suffix=2
    )
    assert bracket_stop("} else {\n    g();\n  }", multi) is None  # a line start again: wait
    assert bracket_stop("} else {\n    g();\n  }\n", multi) == ("stop_rule:bracket_balance", 20)
    # Not at a line start: cut at once, as before.
    mid = StopContext(
        line_prefix="  f(", suffix=")\n", multiline=False, open_brackets="(", closed_in_suffix=1
    )
    assert bracket_stop("x) + g(", mid) == ("stop_rule:bracket_balance", 1)


def test_quote_rule_skips_escaped_quotes() -> None:
    c = StopContext(line_prefix='s = "', suffix='"\n', multiline=False, string_quote='"')
    assert quote_stop('a \\"b', c) is None
    assert quote_stop('a \\"b" + c', c) == ("stop_rule:quote_balance", 5)


def test_indent_rule_leaves_closing_lines_to_the_bracket_rule() -> None:
    c = StopContext(line_prefix="int f() {", suffix="\n", multiline=True, block_indent=1)
    assert indent_stop("\n    return 1;\n}\n", c) is None
    assert indent_stop("\n    return 1;\n}\nint g;\n", c) == ("stop_rule:indent", 16)


def test_repetition_keeps_the_first_copy() -> None:
    assert repetition_stop("\n    f()\n    f()\n    f()\n", ctx()) == ("stop_rule:repetition", 8)
    assert repetition_stop("x = a" + ".b" * 30, ctx()) == ("stop_rule:repetition", 7)
    assert repetition_stop("[0, 0, 0, 0, 0, 0]", ctx()) is None
    assert repetition_stop("\n    f()\n    f()\n", ctx()) is None  # twice may be meant


def test_single_line_mode_finishes_a_statement_whose_brackets_span_lines() -> None:
    text = "result = await Runner.run(\n    agent,\n    msg,\n)\nprint(result)\n"
    assert first_line_stop("result = await Runner.run(\n    agent,", ctx()) is None  # still open
    assert first_line_stop(text, ctx()) == ("newline", text.index("\nprint"))
    # Brackets in a comment or a string are not the statement's; a closer the line did not open
    # (the cursor's own call) does not count either.
    assert first_line_stop("x = 1  # see (below\ny = 2\n", ctx()) == ("newline", 19)
    assert first_line_stop("print('(')\nz\n", ctx()) == ("newline", 10)
    assert first_line_stop("a), b(\n  c)\nd\n", ctx()) == ("newline", 11)


def test_a_statement_left_open_too_long_falls_back_to_its_first_line() -> None:
    text = "call(\n" + "".join(f"    a{i},\n" for i in range(20))
    assert first_line_stop(text, ctx()) == ("newline", len("call("))


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.mark.parametrize(
    ("c", "text"),
    [
        (ctx("    n = ", "\n    return n\n"), "len(xs)\n    return n\n"),
        (StopContext("def f():", "\n", True, block_indent=1), "\n    a = 1\n\n    return a\n\nprint(f())\n"),
        (ctx("", "\n    return dates\n", multiline=True), "x = 1\n    return dates\n"),
        (ctx("    ", "\n", multiline=True), "\n    f()\n    f()\n    f()\n"),
    ],
)
def test_rules_cut_a_crlf_generation_where_they_cut_the_lf_one(c: StopContext, text: str) -> None:
    """A model writes ``\\r\\n`` in a CRLF file: the same rule (newline, indent with a blank line in the
    block, suffix_repeat, repetition) fires at the same line."""
    crlf_ctx = replace(c, suffix=_crlf(c.suffix))

    def run(check_ctx: StopContext, generated: str) -> tuple[str, str] | None:
        check = make_stop_check(check_ctx)
        for i in range(1, len(generated) + 1):
            if (hit := check(generated[:i])) is not None:
                return hit[0], generated[:i][: hit[1]].replace("\r\n", "\n").rstrip("\r")
        return None

    lf = run(c, text)
    assert lf is not None
    assert run(crlf_ctx, _crlf(text)) == lf


def test_newline_is_the_documents() -> None:
    assert ctx("x = ", "\r\ny = 2\r\n").newline == "\r\n"
    assert ctx("x = ", "\ny = 2\n").newline == "\n"
    assert StopContext("x = ", "", False, above="a = 1\r\n").newline == "\r\n"  # the last line
    assert ctx("x = ", "").newline == "\n"


def test_the_lines_around_the_cursor_and_the_files_indent_unit() -> None:
    c = StopContext("\t\t", "\r\n\r\n\t}\r\n", False, above="if (a) {\r\n\tif (b) {\r\n\t\tf();\r\n\r\n")
    assert (c.line_above, c.line_below, c.indent_unit) == ("\t\tf();", "\t}", "\t")
    spaces = "def f():\n  if x:\n    y = 1\n  return y\n\ndef g():\n  pass\n"
    assert StopContext("", "\n", False, above=spaces).indent_unit == "  "
    assert StopContext("", "\n", False, above="x = 1\n").indent_unit == ""  # nothing indented: unknown


def test_single_line_mode_ends_a_line_that_reopens_what_it_closed() -> None:
    c = StopContext(
        line_prefix="  ", suffix="\n    g();\n  }\n", multiline=False, open_brackets="{", closed_in_suffix=1
    )
    assert first_line_stop("} else {\n    h();\n", c) == ("newline", 8)
    assert first_line_stop("} else if (f(x)) {\n", c) == ("newline", 18)
