"""The syntax at the cursor: language resolution, the parsed window, the facts for the stop rules.

The decisions themselves, per language, are golden cases (``golden/shape/``, run by test_golden.py).
"""

from __future__ import annotations

import pytest

from fimble.completion.output.shape import _window, analyze, resolve_language, shape_spec, stop_context


@pytest.mark.parametrize(
    ("language", "path", "expected"),
    [
        ("python", None, "python"),
        ("typescriptreact", "a.tsx", "tsx"),
        ("javascriptreact", None, "javascript"),
        (None, "src/lib.rs", "rust"),
        ("plaintext", "main.go", "go"),
        (None, "notes.md", None),
        (None, None, None),
    ],
)
def test_resolve_language(language: str | None, path: str | None, expected: str | None) -> None:
    assert resolve_language(language, path) == expected


def test_window_is_bounded_on_a_huge_file() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(20_000))
    prefix = "def f():\n" + body + "    "
    head, tail = _window(prefix, "\n" + body)
    assert len(head) <= 8000 and head.count("\n") <= 120
    assert tail.count("\n") < 24
    syntax = analyze(prefix, "\n" + body, "python")
    assert syntax.multiline is False and syntax.reason == "between statements"


def test_window_starts_at_a_top_level_line() -> None:
    prefix = "import os\n\n\nclass A:\n    def f(self):\n        return ("
    head, _ = _window(prefix, ")\n")
    assert head.startswith("class A:")


@pytest.mark.parametrize(
    ("prefix", "language", "starts"),
    [
        ('x = 1\nmsg = """\\\nhello\n"""\nfoo(', "python", 'msg = """'),
        ('"""\nModule docstring.\n"""\nfoo(', "python", '"""\nModule'),
        ("const a = 1;\nconst x = `\ntext\n`;\nfoo(", "typescript", "const x = `"),
    ],
    ids=["module_message", "module_docstring", "template_literal"],
)
def test_window_does_not_start_at_a_literals_closing_quotes(prefix: str, language: str, starts: str) -> None:
    """Parsed from its closing quotes, a literal would swallow the cursor: flask's ``ContextVar(|``."""
    suffix = '\nbar()\ny = """\nz\n"""\n'
    head, _ = _window(prefix, suffix)
    assert head.startswith(starts)
    syntax = analyze(prefix, suffix, language)
    assert syntax.open_brackets == "(" and syntax.reason == "open bracket"


def test_without_a_grammar_the_text_heuristic_decides() -> None:
    syntax = analyze("tasks:", "\n", None)
    assert (syntax.multiline, syntax.reason) == (True, "line opens a block")
    assert stop_context("tasks:", "\n", syntax).open_brackets is None  # bracket rule off


def test_facts_for_the_stop_rules() -> None:
    syntax = analyze("if (a(b(", ")) {\n}\n", "javascript")
    assert syntax.open_brackets == "((("
    assert syntax.closed_in_suffix == 2  # the ")" closing "if (" is not in the suffix: "{" comes first
    ctx = stop_context("if (a(b(", ")) {\n}\n", syntax)
    assert ctx.line_prefix == "if (a(b(" and ctx.open_brackets == "((("


def test_a_template_substitution_closes_only_itself() -> None:
    # Its "}" was matched by kind: it closed the function's "{" (and the call opened after it) in the
    # prefix, or counted as the suffix closing the loop's "{".
    syntax = analyze("function f(id) {\n\tlog(`user ${id}`, format(", "\n}\n", "typescript")
    assert syntax.open_brackets == "{(("
    prefix = "function f(xs) {\n\tfor (const x of xs) {"
    syntax = analyze(prefix, "\n\tlog(`${xs.length}`);\n}\n", "javascript")
    assert (syntax.open_brackets, syntax.closed_in_suffix) == ("{{", 1)


def test_forced_shape_keeps_the_facts() -> None:
    syntax = analyze('print("', '")\n', "python", multiline=True)
    assert (syntax.multiline, syntax.reason) == (True, "always")
    assert syntax.string_quote == '"' and syntax.closed_in_suffix == 1


def test_spec_falls_back_to_default() -> None:
    assert shape_spec("java").header_keywords == frozenset()
    assert shape_spec("python").block_openers == frozenset({":"})
    assert shape_spec("c").brackets == {"(": ")", "[": "]", "{": "}"}


def test_stop_context_sees_whole_lines_above() -> None:
    prefix = "x" * 10_000 + "\n" + "def f():\r\n    a = 1\r\n    "
    ctx = stop_context(prefix, "\r\n", analyze(prefix, "\r\n", "python"))
    assert ctx.above == "def f():\r\n    a = 1\r\n"  # bounded, and never the tail of a cut line
    assert ctx.newline == "\r\n"
    one_long_line = "y = " + "1 + " * 2000 + "1\n"
    assert stop_context(one_long_line, "\n", analyze(one_long_line, "\n", "python")).above == ""


def test_a_cursor_in_a_string_or_a_comment_is_prose() -> None:
    assert analyze('def f():\n    """Args:\n', '\n    """\n', "python").prose
    assert analyze("int x; // see\n", "\n", "c").prose is False
    assert analyze("int x; // see", "\n", "c").prose
    assert not analyze("def f():\n    x = 1\n", "\n", "python").prose


def test_typing_inside_a_module_docstring_stays_inside_it() -> None:
    """Quotes alone on a line also open a literal: the window starts there, and the cursor is in it."""
    prefix = '"""\nModule doc, (see'
    head, _ = _window(prefix, '\n"""\nimport os\n')
    assert head.startswith('"""\n')
    assert analyze(prefix, '\n"""\nimport os\n', "python").reason == "inside a string"
