"""The completion-item fallback's snippet form (pure; the real client path is in test_neovim.py)."""

from __future__ import annotations

import pytest

from fimble.server.lsp.handlers.completion import as_snippet


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("dt.date(year, month, day)", "        dates.append(", "dt.date(year, month, day)"),
        ('f"${cost}"', "    x = ", 'f"\\${cost\\}"'),
        ("a\\b", "", "a\\\\b"),
        # Following lines lose the cursor line's indentation: the client adds it back.
        ("if x:\n        y()\n    z()", "    ", "if x:\n    y()\nz()"),
        ("pass\n\n    return", "    ", "pass\n\nreturn"),
    ],
)
def test_snippet_expands_to_the_suggestion(text: str, line: str, expected: str) -> None:
    assert as_snippet(text, line) == expected


def test_a_line_left_of_the_cursor_line_cannot_be_a_snippet() -> None:
    assert as_snippet("x\n  return", "    ") is None
