"""Python function bodies cut out of the parse, so tree-sitter reads only what the index keeps.

Tree-sitter parses Python at about 10 MB/s and most of a Python file is function bodies, from which
the index takes nothing but imports: definitions nested in a body are not callable from another file
(and not indexed), while "identifiers used" and the BM25 windows come from the raw bytes
(``lexical``), not from the tree. ``skeleton`` finds each function body and returns *gaps*, spans the
parser skips (``Parser.included_ranges`` is their complement), and a copy of the source edited so
that what is left is still valid Python:

* a body keeps its first statement when it is a string (the docstring) or an import; otherwise a
  ``0`` is written over its first byte and the rest of that line is blanked (a body needs a
  statement);
* every import statement of a body stays (local imports feed ``imports_of``), moved left onto the
  body's indentation so that it remains a statement of that body, on its own line.

Every byte keeps its offset, so rows, columns and bytes of everything outside the bodies are those
of the original. What changes is where a cut function (and a class ending with one) ends:
``Skeleton.ends`` gives the original end of each.

The scan is a tokenizer reduced to what decides the structure: strings and comments (one regular
expression), brackets, backslash continuations, blank and comment-only lines (numpy over the bytes
with strings and comments masked), and indentation as tree-sitter measures it (a tab counts 8).
Whatever it is unsure about (a form feed in an indentation, a lone carriage return, unbalanced
brackets, an import it cannot move) gives ``None``: the caller parses the whole file, as it does when
the cut parse reports a syntax error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import repeat

import numpy as np

__all__ = ["Skeleton", "skeleton"]

# A string from its opening quote (a prefix does not change where it ends: a backslash escapes the
# next character even in a raw string), or a comment. Unterminated strings end at the line (single
# quotes) or at the end of the file (triple quotes); the file then has a syntax error and is parsed
# whole.
_TOKENS = re.compile(
    rb'("""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:"""|\Z)'
    rb"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)"
    rb'|"[^"\\\n]*(?:\\.[^"\\\n]*)*(?:"|(?=\n)|\Z)'
    rb"|'[^'\\\n]*(?:\\.[^'\\\n]*)*(?:'|(?=\n)|\Z)"
    rb"|#[^\n]*)",
    re.DOTALL,
)
_ASYNC_DEF = re.compile(rb"async[ \t]+def[ \t\\]")
# Tables for bytes.translate, which classifies a file's bytes several times faster than numpy's
# fancy indexing: whitespace -> 1 (read as bool), opening bracket -> 1 and closing -> -1 (as int8).
_WS_BYTES = bytes(c in b" \t\r\f" for c in range(256))
_BRACKET_BYTES = bytes(1 if c in b"([{" else 255 if c in b")]}" else 0 for c in range(256))
_MASK_TABLE = bytes(1 if c != 10 else 10 for c in range(256))
_QUOTE = np.zeros(256, dtype=bool)
_QUOTE[[ord('"'), ord("'")]] = True
_PREFIX = np.zeros(256, dtype=bool)
_PREFIX[list(b"rRbBuUfF")] = True
_AFTER_KEYWORD = np.zeros(256, dtype=bool)  # what may follow `def` / `import` / `from`
_AFTER_KEYWORD[list(b" \t\\(")] = True
_PAD = b"\n" + bytes(8)  # room to look a few bytes past the end
_BYTE, _U8, _U16 = np.uint64(0xFF), np.uint64(8), np.uint64(16)


@dataclass(frozen=True, slots=True)
class Skeleton:
    """What to parse instead of a file.

    ``source``: the original with the edits above (same length). ``gaps``: spans the parser skips,
    each (start byte, row, column, end byte, row, column), starting at a line start. ``ends``: per
    cut function, keyed by the byte where its ``def`` (or ``async``) starts, (last cut byte, original
    end row, column, byte); a function node ending at or before that byte ends there in the file.
    """

    source: bytes
    gaps: list[tuple[int, int, int, int, int, int]]
    ends: dict[int, tuple[int, int, int, int]]


@dataclass(frozen=True, slots=True)
class _Lines:
    """The logical lines of a file (statements' first lines) and what is known of every line."""

    raw: np.ndarray  # the file's bytes + _PAD
    starts: np.ndarray  # per physical line: first byte
    ends: np.ndarray  # per physical line: its newline (or the end of the file)
    first: np.ndarray  # per physical line: first byte after the indentation
    blank: np.ndarray  # per physical line: empty or comment-only
    logical: np.ndarray  # physical line numbers of the logical lines
    indent: np.ndarray  # per logical line: its indentation (tree-sitter's measure)
    comment_ends: np.ndarray  # where each comment ends (sorted)


def skeleton(data: bytes) -> Skeleton | None:
    """What to parse instead of ``data`` (see the module docstring), or None when there is nothing
    to cut or the scan is not sure of the file's structure."""
    if b"def" not in data or (b"\r" in data and data.count(b"\r") != data.count(b"\r\n")):
        return None  # (old Mac line ends: not worth the risk)
    lines = _scan(data)
    if lines is None or len(lines.logical) < 3:
        return None
    return _cut(data, lines)


def _scan(data: bytes) -> _Lines | None:
    parts = _TOKENS.split(data)
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    token_ends = np.cumsum(lengths)
    token_starts = (token_ends - lengths)[1::2]
    token_ends = token_ends[1::2]
    # Strings and comments masked (newlines kept): brackets and backslashes left are code.
    parts[1::2] = map(bytes.translate, parts[1::2], repeat(_MASK_TABLE))
    masked = b"".join(parts) + b"\n"  # a final newline as sentinel
    arr = np.frombuffer(masked, dtype=np.uint8)
    raw = np.frombuffer(data + _PAD, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], ends[:-1] + 1))
    # Bracket depth at each line start; below zero or unclosed at the end means a misread.
    brackets = np.frombuffer(masked.translate(_BRACKET_BYTES), np.int8)
    per_line = np.add.reduceat(brackets, starts, dtype=np.int32)
    depth = np.cumsum(per_line)
    if depth[-1] != 0 or depth.min() < 0:
        return None
    # First byte of each line after its indentation (its newline if it is empty).
    is_ws = np.frombuffer(masked.translate(_WS_BYTES), bool)
    run_ends = np.flatnonzero(is_ws[:-1] & ~is_ws[1:]) + 1
    if len(run_ends):
        after = run_ends[np.minimum(np.searchsorted(run_ends, starts, side="right"), len(run_ends) - 1)]
        first = np.where(is_ws[starts], after, starts)
    else:
        first = starts
    # Lines that begin inside a string continue a statement.
    if len(token_starts):
        at = np.maximum(np.searchsorted(token_starts, starts, side="right") - 1, 0)
        in_string = (starts > token_starts[at]) & (starts < token_ends[at])
    else:
        in_string = np.zeros(len(starts), dtype=bool)
    blank = ((arr[first] == 10) | (raw[first] == 35)) & ~in_string  # empty or a comment alone
    tail = ends[:-1] - 1
    tail = np.where(raw[np.maximum(tail, 0)] == 13, tail - 1, tail)
    continued = np.concatenate(([False], (tail >= 0) & (arr[np.maximum(tail, 0)] == 92)))
    depth_at_start = np.concatenate(([0], depth[:-1]))
    logical = np.flatnonzero(~blank & ~in_string & (depth_at_start == 0) & ~continued)
    l_start, l_first = starts[logical], first[logical]
    indent = l_first - l_start
    if b"\t" in data:
        tabs = np.flatnonzero(raw == 9)
        indent = indent + 7 * (np.searchsorted(tabs, l_first) - np.searchsorted(tabs, l_start))
    if b"\f" in data:
        feeds = np.flatnonzero(raw == 12)
        if (np.searchsorted(feeds, l_first) - np.searchsorted(feeds, l_start)).any():
            return None  # a form feed in an indentation: tree-sitter's count would be ours to guess
    comment_ends = token_ends[raw[token_starts] == 35] if len(token_starts) else token_ends
    return _Lines(raw, starts, ends, first, blank, logical, indent, comment_ends)


def _heads8(raw: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The 8 bytes from each position as one little-endian integer (``raw`` ends with ``_PAD``):
    one gather instead of one per byte for every keyword test."""
    view = np.ndarray((len(raw) - 7,), dtype="<u8", buffer=raw, strides=(1,))
    return view[pos]


def _keyword_at(heads8: np.ndarray, word: bytes) -> np.ndarray:
    """Which heads (``_heads8``) start with ``word`` followed by a space, tab, backslash or
    parenthesis."""
    n = len(word)
    hit = (heads8 & np.uint64((1 << 8 * n) - 1)) == np.uint64(int.from_bytes(word, "little"))
    hit &= _AFTER_KEYWORD[(heads8 >> np.uint64(8 * n)) & np.uint64(0xFF)]
    return hit


def _heads(data: bytes, l_first: np.ndarray, l8: np.ndarray) -> np.ndarray:
    """Indices (into the logical lines) of the ``def`` and ``async def`` lines."""
    is_def = _keyword_at(l8, b"def")
    for k in np.flatnonzero(_keyword_at(l8, b"async")).tolist():
        if _ASYNC_DEF.match(data, int(l_first[k])):
            is_def[k] = True
    return np.flatnonzero(is_def)


def _cut(data: bytes, lines: _Lines) -> Skeleton | None:
    logical, indent, raw = lines.logical, lines.indent, lines.raw
    n_logical = len(logical)
    l_first = lines.first[logical]
    l8 = _heads8(raw, l_first)
    k = _heads(data, l_first, l8)
    k = k[k + 2 < n_logical]
    k = k[indent[k + 1] > indent[k]]  # an indented body follows (not a one-line `def f(): ...`)
    if not len(k):
        return None
    # The logical line after each body: the next one indented no deeper than the header.
    stop = np.full(len(k), n_logical, dtype=np.int64)
    for level in np.unique(indent[k]).tolist():
        shallow = np.flatnonzero(indent <= level)
        sel = np.flatnonzero(indent[k] == level)
        stop[sel] = np.concatenate((shallow, [n_logical]))[np.searchsorted(shallow, k[sel], side="right")]
    # Only the outermost functions (one inside another's body goes with it), of 2+ statements.
    reach = np.maximum.accumulate(stop)
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = k[1:] >= reach[:-1]
    keep &= k + 2 < stop
    k, stop = k[keep], stop[keep]
    if not len(k):
        return None
    # A body ends at its last non-blank line: comments below it stay, as they may document the
    # next definition (and tree-sitter may count some in the body, the same way in both parses).
    solid = np.flatnonzero(~lines.blank)
    last = solid[np.searchsorted(solid, np.concatenate((logical, [len(lines.starts)]))[stop]) - 1]
    cut_end = lines.ends[last]
    stmt = l_first[k + 1]  # the body's first statement
    stmt8 = l8[k + 1]
    b0, b1, b2 = stmt8 & _BYTE, (stmt8 >> _U8) & _BYTE, (stmt8 >> _U16) & _BYTE
    kept_first = (
        _QUOTE[b0]
        | (_PREFIX[b0] & (_QUOTE[b1] | (_PREFIX[b1] & _QUOTE[b2])))
        | _keyword_at(stmt8, b"import")
        | _keyword_at(stmt8, b"from")
    )
    # The cut starts after the kept statement, or at the line after the one given its "0".
    cut_start = np.where(kept_first, lines.starts[logical[k + 2]], lines.starts[logical[k + 1] + 1])
    ok = cut_start < cut_end
    k, cut_start, cut_end, last, stmt, kept_first = (
        k[ok],
        cut_start[ok],
        cut_end[ok],
        last[ok],
        stmt[ok],
        kept_first[ok],
    )
    if not len(k):
        return None
    out = bytearray(data)
    for at, line_end in zip(
        stmt[~kept_first].tolist(), lines.ends[logical[k[~kept_first] + 1]].tolist(), strict=True
    ):
        out[at:line_end] = b"0" + b" " * (line_end - at - 1)
    # A body ends where its last line's code ends, or with that line's comment (which, for
    # tree-sitter, holds everything up to the newline: trailing spaces, a carriage return).
    last_start = lines.starts[last].tolist()
    at = np.minimum(np.searchsorted(lines.comment_ends, cut_end), max(len(lines.comment_ends) - 1, 0))
    commented = (lines.comment_ends[at] == cut_end).tolist() if len(lines.comment_ends) else [False] * len(k)
    end_cols = [
        b - a if comment else len(data[a:b].rstrip())
        for a, b, comment in zip(last_start, cut_end.tolist(), commented, strict=True)
    ]
    ends = {
        head: (c_end, row, col, start + col)
        for head, c_end, row, col, start in zip(
            l_first[k].tolist(), cut_end.tolist(), last.tolist(), end_cols, last_start, strict=True
        )
    }
    kept = _keep_imports(data, out, lines, l_first, l8, k, cut_start, cut_end)
    if kept is None:
        return None
    return Skeleton(bytes(out), _gaps(cut_start.tolist(), cut_end.tolist(), kept, lines), ends)


def _keep_imports(
    data: bytes,
    out: bytearray,
    lines: _Lines,
    l_first: np.ndarray,
    l8: np.ndarray,
    heads: np.ndarray,
    cut_start: np.ndarray,
    cut_end: np.ndarray,
) -> list[tuple[int, int]] | None:
    """Put back the import statements of the cut bodies, moved onto their body's indentation; their
    spans, or None if one cannot be moved (an indentation narrower than the body's)."""
    logical = lines.logical
    is_import = np.flatnonzero(_keyword_at(l8, b"import") | _keyword_at(l8, b"from"))
    pos = l_first[is_import]
    body = np.searchsorted(cut_start, pos, side="right") - 1
    inside = (body >= 0) & (pos < cut_end[np.maximum(body, 0)])
    if not inside.any():
        return []
    is_import, pos, body = is_import[inside], pos[inside], body[inside]
    next_start = np.concatenate((lines.starts[logical], [len(data)]))[is_import + 1]
    stmt_line = logical[heads[body] + 1]  # the body's first statement: its indentation is the body's
    kept: list[tuple[int, int]] = []
    for start, text, stop, body_start, body_first, end in zip(
        lines.starts[logical[is_import]].tolist(),
        pos.tolist(),
        next_start.tolist(),
        lines.starts[stmt_line].tolist(),
        lines.first[stmt_line].tolist(),
        cut_end[body].tolist(),
        strict=True,
    ):
        indentation = data[body_start:body_first]
        if text - start < len(indentation):
            return None
        stop = min(stop, end)
        moved = indentation + data[text:stop]
        pad = b" " * ((stop - start) - len(moved))
        newline = moved.find(b"\n")
        out[start:stop] = moved + pad if newline < 0 else moved[:newline] + pad + moved[newline:]
        kept.append((start, stop))
    return kept


def _gaps(
    cut_start: list[int], cut_end: list[int], kept: list[tuple[int, int]], lines: _Lines
) -> list[tuple[int, int, int, int, int, int]]:
    """The cut spans minus the kept imports, with their (row, column) points. A gap starts at a line
    start: tree-sitter's Python scanner misreads a token that ends right before an excluded range."""
    spans: list[int] = []
    imports = iter(kept)
    span = next(imports, None)
    for start, end in zip(cut_start, cut_end, strict=True):
        while span is not None and span[0] < end:
            if span[0] > start:
                spans += (start, span[0])
            start = max(start, span[1])
            span = next(imports, None)
        if start < end:
            spans += (start, end)
    if not spans:
        return []
    pos = np.asarray(spans, dtype=np.int64)
    rows = np.searchsorted(lines.starts, pos, side="right") - 1
    cols = (pos - lines.starts[rows]).tolist()
    pos_l, rows_l = pos.tolist(), rows.tolist()
    return [
        (pos_l[i], rows_l[i], cols[i], pos_l[i + 1], rows_l[i + 1], cols[i + 1])
        for i in range(0, len(pos_l), 2)
    ]
