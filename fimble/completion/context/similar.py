"""Similar code, cut to the spot that reads like the lines above the cursor.

A BM25 neighbour is a window of ~24 lines (110-490 tokens); whole, it rarely fits the context
budget (256 tokens), and where it does, most of it is not what helps. What helps is what follows
code written like the cursor's: rxjs ``windowTime``'s ``new Subscription();`` where ``windowCount``
has it after the same lines, ``handleEvent(evt: E)`` as ``fromEventPattern`` names it, a flask
test's ``raise Exception("oh no")`` where another test raises after the same setup. So the window
is cut to a few lines before the spot whose lines above match the cursor's lines above, that spot,
and a few after it. On 130 lines of three projects (seed 3) the full prompt matched 70 with such
windows first, 66 with whole ones ranked last; a first prompt given 128 tokens of them matched 68
against 65 without, but lost as served
(``bench/results/similar_aligned.json``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["aligned_spot", "window_around"]

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[^\w\s]")
_QUERY_LINES = 4  # non-blank lines above the cursor compared with the lines above a candidate spot
_LOOK_BACK = 12  # lines searched upwards for them
_ABOVE, _BELOW = 5, 3  # lines shown before the matching spot and after it
_SLACK = 4  # lines beyond the window searched for the spot (its continuation may lie past its end)


def _tokens(line: str) -> set[str]:
    return set(_TOKEN.findall(line))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _above(lines: Sequence[str], row: int, count: int) -> list[str]:
    """The last ``count`` non-blank lines above ``row`` (within ``_LOOK_BACK``), top first."""
    return [ln for ln in lines[max(0, row - _LOOK_BACK) : row] if ln.strip()][-count:] if count else []


def aligned_spot(
    file_lines: Sequence[str], start: int, end: int, lines: Sequence[str], line: int
) -> int | None:
    """The row of ``file_lines``, near the window ``start``..``end`` (inclusive), that plays the
    part of the cursor's ``line`` in ``lines``: the one whose non-blank lines above are most alike
    the cursor's (token sets, line by line), and whose own line is most alike what is typed on the
    cursor's line. None when nothing lines up (fewer lines above any row than above the cursor, or
    nothing in common)."""
    query = [_tokens(q) for q in _above(lines, line, _QUERY_LINES)]
    typed = _tokens(lines[line]) if 0 <= line < len(lines) and lines[line].strip() else set()
    best, spot = 0.0, None
    for row in range(max(0, start - _SLACK), min(len(file_lines), end + 1 + _SLACK)):
        before = _above(file_lines, row, len(query))
        if len(before) < len(query):
            continue
        score = sum(_jaccard(q, _tokens(b)) for q, b in zip(query, before, strict=True))
        if typed:
            score += _jaccard(typed, _tokens(file_lines[row]))
        if score > best:
            best, spot = score, row
    return spot


def window_around(file_lines: Sequence[str], row: int, *, above: int = _ABOVE, below: int = _BELOW) -> str:
    """``above`` lines before ``row`` (an ``aligned_spot``), the row, ``below`` after it."""
    return "\n".join(file_lines[max(0, row - above) : row + 1 + below])
