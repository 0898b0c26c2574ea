"""Lexical analysis of a file: overlapping text windows, their BM25 terms, and the identifiers used.

Works on raw bytes with an ASCII identifier regex, so invalid UTF-8 costs nothing and no decode is
needed; non-ASCII words are not searchable (a deliberate trade for speed: this runs on every byte of the
workspace). Windows are two consecutive *blocks* of ``stride`` lines (capped in bytes, so minified
one-line files still split), hence each window overlaps its neighbours by half. Terms are lower-cased
identifiers minus the stop words in ``data/stopwords.txt``; every counting step runs in C (regex
``findall`` + ``Counter``), the only Python loop is over (window, term) pairs.
"""

from __future__ import annotations

import functools
import re
from array import array
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from itertools import accumulate

__all__ = ["Lexical", "Window", "analyze", "query_terms", "stopwords", "words"]

WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_MAX_TERM = 48
_MAX_IDENTIFIERS = 4000
_MAX_BLOCKS = 60000  # keeps window indexes in 16 bits


@dataclass(frozen=True, slots=True)
class Window:
    """A retrievable span: 0-based inclusive lines and the byte range [start_byte, end_byte)."""

    start_line: int
    end_line: int
    start_byte: int
    end_byte: int


@dataclass(frozen=True, slots=True)
class Lexical:
    """``postings`` maps a term to packed uint16 triples (window, term frequency, window length)."""

    n_lines: int
    windows: tuple[Window, ...]
    postings: dict[bytes, bytes]
    total_length: int
    identifiers: tuple[str, ...]


@functools.cache
def stopwords() -> frozenset[bytes]:
    text = resources.files("fimble.indexer.data").joinpath("stopwords.txt").read_text("utf-8")
    words = (line.split("#", 1)[0].split() for line in text.splitlines())
    return frozenset(word.encode() for line in words for word in line)


def words(data: bytes) -> list[bytes]:
    """Identifier-like words in order, case kept (for identifiers near a line)."""
    return WORD.findall(data)


def query_terms(text: str | bytes) -> list[bytes]:
    """The distinct BM25 terms of a query, in first-seen order."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    stop = stopwords()
    seen: dict[bytes, None] = {}
    for term in WORD.findall(data.lower()):
        if len(term) > 1 and len(term) <= _MAX_TERM and term not in stop:
            seen.setdefault(term, None)
    return list(seen)


def _blocks(data: bytes, stride: int, block_bytes: int) -> tuple[int, list[tuple[int, int, int, int]]]:
    """Blocks of ``stride`` lines, at most ``block_bytes`` each unless one line is longer:
    (first line, end line exclusive, start byte, end byte)."""
    lines = data.split(b"\n")
    n_lines = max(len(lines) - 1 if data.endswith(b"\n") else len(lines), 1)
    stride = max(stride, -(-n_lines // _MAX_BLOCKS))
    # cum[i] = bytes in lines[:i+1] without newlines; line i starts at cum[i-1] + i.
    cum = list(accumulate(map(len, lines)))

    def offset(line: int) -> int:
        return min(cum[line - 1] + line, len(data)) if line else 0

    blocks: list[tuple[int, int, int, int]] = []
    line = 0
    while line < n_lines:
        end = min(line + stride, n_lines)
        start_byte = offset(line)
        if offset(end) - start_byte > block_bytes:
            low, high = line + 1, end  # the last end whose block still fits (at least one line)
            while low < high:
                mid = (low + high + 1) // 2
                if offset(mid) - start_byte <= block_bytes:
                    low = mid
                else:
                    high = mid - 1
            end = low
        blocks.append((line, end, start_byte, offset(end)))
        line = end
    return n_lines, blocks


def analyze(
    data: bytes, *, stride: int = 12, block_bytes: int = 2048, keywords: frozenset[str] = frozenset()
) -> Lexical:
    """Windows, postings and identifiers of one file's bytes."""
    n_lines, blocks = _blocks(data, stride, block_bytes)
    lowered = data.lower()
    stop = stopwords()
    windows: list[Window] = []
    postings: dict[bytes, array] = {}
    total = 0
    for index in range(max(len(blocks) - 1, 1)):
        first_line, _, start, _ = blocks[index]
        _, end_line, _, end = blocks[min(index + 1, len(blocks) - 1)]
        windows.append(Window(first_line, end_line - 1, start, end))
        counts = Counter(WORD.findall(lowered, start, end))
        for term in stop.intersection(counts):
            del counts[term]
        length = min(sum(counts.values()), 0xFFFF)
        total += length
        for term, tf in counts.items():
            if len(term) <= _MAX_TERM and len(term) > 1:
                entry = postings.get(term)
                if entry is None:
                    entry = postings[term] = array("H")
                entry.extend((index, min(tf, 0xFFFF), length))
    identifiers = {w.decode("ascii") for w in WORD.findall(data)}
    identifiers.difference_update(keywords)
    ranked = sorted(identifiers)
    if len(ranked) > _MAX_IDENTIFIERS:
        ranked = ranked[:_MAX_IDENTIFIERS]
    return Lexical(
        n_lines=n_lines,
        windows=tuple(windows),
        postings={term: entry.tobytes() for term, entry in postings.items()},
        total_length=total,
        identifiers=tuple(ranked),
    )
