"""Cleaning a finished generation before it is shown: pure functions over strings."""

from __future__ import annotations

from fimble.completion.stops import StopContext

__all__ = ["clean_completion", "trim_suffix_overlap"]

_PAIRS = {")": "(", "]": "[", "}": "{"}


def _excess(line: str) -> int:
    """How unbalanced a line is: closers without an opener, plus unpaired double quotes."""
    stack: list[str] = []
    unmatched = 0
    for ch in line:
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if stack and stack[-1] == _PAIRS[ch]:
                stack.pop()
            else:
                unmatched += 1
    return unmatched + line.count('"') % 2


def trim_suffix_overlap(text: str, line_prefix: str, line_suffix: str) -> str:
    """Drop the end of ``text`` that repeats what already follows the cursor on its line.

    ``dates.append(|)`` completed as ``dt.date(y, m, d))`` would leave two closing parentheses once
    the editor inserts it before the existing ``)``. The overlap is trimmed only when that makes the
    line better balanced, so a correct ``dt.date(y, m, d)`` keeps its own ``)``.
    """
    rest = line_suffix.rstrip()
    body = text.rstrip()
    if not rest or not body:
        return text
    before = _excess(line_prefix + body + rest)
    if before == 0:
        return text
    for k in range(min(len(rest), len(body)), 0, -1):
        if body.endswith(rest[:k]) and _excess(line_prefix + body[:-k] + rest) < before:
            return body[:-k]
    return text


def clean_completion(text: str, ctx: StopContext) -> str:
    """Trailing whitespace off and, for a one-line suggestion, no overlap with the line's suffix."""
    text = text.rstrip()
    if "\n" not in text:
        text = trim_suffix_overlap(text, ctx.line_prefix, ctx.suffix.split("\n", 1)[0])
    return text
