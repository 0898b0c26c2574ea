"""Cleaning a finished generation before it is shown: pure functions over strings."""

from __future__ import annotations

from fimble.completion.stops import StopContext, make_stop_check

__all__ = ["clean_completion", "trim_suffix_lines", "trim_suffix_overlap", "whole_lines"]

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


def _unclosed(line: str) -> int:
    """Openers left open at the end of ``line`` (closers without an opener are not counted)."""
    depth = 0
    for ch in line:
        if ch in "([{":
            depth += 1
        elif ch in _PAIRS and depth:
            depth -= 1
    return depth


def _own_closers_from(text: str) -> int:
    """Where the last closing bracket that pairs with an opener of ``text`` itself ends (0: none)."""
    stack: list[str] = []
    end = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS and stack and stack[-1] == _PAIRS[ch]:
            stack.pop()
            end = i + 1
    return end


def trim_suffix_overlap(text: str, line_prefix: str, line_suffix: str) -> str:
    """Drop the end of ``text`` that repeats what already follows the cursor on its line.

    ``dates.append(|)`` completed as ``dt.date(y, m, d))`` would leave two closing parentheses once
    the editor inserts it before the existing ``)``. A part of the rest of the line is trimmed only
    when that makes the line better balanced, so a correct ``dt.date(y, m, d)`` keeps its own ``)``;
    all of it (``let n = |;`` completed as ``items.length;``) also when balance stays the same.

    The balance is the cursor's line alone, which cannot see a bracket opened on a line above it
    (``value=|)`` inside a ``compute(`` call): a closer that pairs with an opener of the suggestion
    itself is never trimmed, or ``foo(bar(x))`` there would lose the ``)`` it needs.
    """
    rest = line_suffix.rstrip()
    body = text.rstrip()
    if not rest or not body:
        return text
    own = _own_closers_from(body)  # body[:own] keeps every pair the suggestion closes itself
    before = _excess(line_prefix + body + rest)
    if len(body) > len(rest) and body.endswith(rest) and len(body) - len(rest) >= own:
        trimmed = line_prefix + body[: -len(rest)] + rest
        if _excess(trimmed) <= before and _unclosed(trimmed) <= _unclosed(line_prefix + body + rest):
            return body[: -len(rest)]
    if before == 0:
        return text
    for k in range(min(len(rest), len(body) - own), 0, -1):
        if body.endswith(rest[:k]) and _excess(line_prefix + body[:-k] + rest) < before:
            return body[:-k]
    return text


def trim_suffix_lines(text: str, suffix: str) -> str:
    """Drop the last lines of a multi-line ``text`` that repeat the first lines after the cursor.

    The suffix-repeat stop catches a repeated line once it is complete; a generation cut by the
    token limit may end in the middle of one, or in lines the stop saw only as a whole.
    """
    lines = text.split("\n")
    head = suffix.split("\n", 2 * len(lines) + 2)[1 : 2 * len(lines) + 1]  # not the whole rest of the file
    after = [line.strip() for line in head if line.strip()]
    for k in range(min(len(lines) - 1, len(after)), 0, -1):
        tail = [line.strip() for line in lines[-k:]]
        if all(tail) and tail == after[:k] and any(ch.isalnum() for ch in "".join(tail)):
            return "\n".join(lines[:-k]).rstrip()
    return text


def clean_completion(text: str, ctx: StopContext) -> str:
    """Trailing whitespace off, and no overlap with the suffix: for a one-line suggestion with the rest
    of the cursor's line, for a block with the lines that follow it.

    The stop rules judge a line once it is complete; a generation that ended (end of generation, token
    limit) in the middle of its last line has that line judged here, as if a newline followed.
    The lines are cleaned with ``\n`` and given the document's line end last: a model writes ``\n`` or
    ``\r\n`` in a CRLF file, and the suggestion must read like the file.
    """
    text = text.replace("\r\n", "\n").rstrip()
    if text and (hit := make_stop_check(ctx)(text + "\n")) is not None:
        text = text[: hit[1]].rstrip()
    if "\n" not in text:
        text = trim_suffix_overlap(text, ctx.line_prefix, ctx.suffix.split("\n", 1)[0])
    else:
        text = trim_suffix_lines(text, ctx.suffix)
    return text.replace("\n", ctx.newline) if ctx.newline != "\n" else text


def whole_lines(text: str) -> str:
    """The complete lines of a cut-off multi-line suggestion (nothing if the first is unfinished)."""
    cut = text.rfind("\n")
    return text[:cut].rstrip() if cut > 0 and text[:cut].strip() else ""
