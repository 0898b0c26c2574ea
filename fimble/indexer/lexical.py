"""Lexical analysis of a file: blocks of lines, their BM25 terms, and the identifiers used.

Runs on every byte of the workspace, so it is built around what CPython does in C: a bytes regex
``findall`` per block (invalid UTF-8 costs nothing, no decode), Counter's C counting loop,
``chain``/``map`` to flatten. Terms are case-sensitive identifiers (code spells a name the same way
everywhere; one tokenisation serves both BM25 and "identifiers used") minus the stop words in
``data/stopwords.toml``; non-ASCII words are not terms.

A file is cut into *blocks* of ``stride`` lines (capped in bytes, so minified one-line files still
split); a retrieval *window* is two consecutive blocks, so windows overlap their neighbours by half.
Postings are kept per block and windows are scored from them at query time (bm25.py): half the
entries of per-window postings, same ranking.

Terms are identified by a 64-bit hash (two CRC-32s, stable across processes, unlike ``hash()``): the
writer groups and sorts postings as integers with numpy instead of as strings in Python.
"""

from __future__ import annotations

import functools
import re
import tomllib
import zlib
from array import array
from collections import _count_elements  # Counter's C core, without Counter's Python overhead
from dataclasses import dataclass
from importlib import resources
from itertools import accumulate, chain, repeat
from operator import add
from typing import NamedTuple

__all__ = ["Block", "Lexical", "analyze", "query_terms", "stopwords", "term_hash", "words"]

WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_MAX_IDENTIFIER = 64
_MAX_BLOCKS = 60000  # block numbers are stored in 16 bits
_SEED = 0x9E3779B9
_crc = zlib.crc32


class Block(NamedTuple):
    """Lines [start_line, end_line) at bytes [start_byte, end_byte)."""

    start_line: int
    end_line: int
    start_byte: int
    end_byte: int


@dataclass(frozen=True, slots=True)
class Lexical:
    """Postings as parallel arrays, one entry per (term, block): ``hashes`` (uint64 term ids),
    ``blocks`` and ``tfs`` (uint16), plus ``block_lengths`` (terms per block, uint16)."""

    n_lines: int
    blocks: tuple[Block, ...]
    hashes: bytes
    entry_blocks: bytes
    tfs: bytes
    block_lengths: bytes
    total_length: int
    identifiers: tuple[bytes, ...]


def term_hash(term: bytes) -> int:
    """The 64-bit id of a term; the same in every process and Python version."""
    return (_crc(term) << 32) | _crc(term, _SEED)


@functools.cache
def stopwords() -> frozenset[bytes]:
    """Stop words as listed, Capitalised and UPPER, plus single characters."""
    text = resources.files("fimble.indexer.data").joinpath("stopwords.toml").read_text("utf-8")
    listed = tomllib.loads(text)["words"].split()
    forms = {f for w in listed for f in (w, w.capitalize(), w.upper())}
    forms |= {chr(c) for c in range(ord("a"), ord("z") + 1)} | {chr(c) for c in range(ord("A"), ord("Z") + 1)}
    forms.add("_")
    return frozenset(f.encode() for f in forms)


@functools.lru_cache(maxsize=32)
def _encoded(keywords: frozenset[str]) -> frozenset[bytes]:
    return frozenset(k.encode() for k in keywords)


def words(data: bytes) -> list[bytes]:
    """Identifier-like words in order (case kept)."""
    return WORD.findall(data)


def query_terms(text: str | bytes) -> list[bytes]:
    """The distinct BM25 terms of a query, in first-seen order."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    stop = stopwords()
    return [t for t in dict.fromkeys(WORD.findall(data)) if t not in stop]


def _blocks(data: bytes, stride: int, block_bytes: int) -> tuple[int, list[Block]]:
    """Blocks of ``stride`` lines, at most ``block_bytes`` each unless one line is longer."""
    lines = data.split(b"\n")
    n_lines = max(len(lines) - 1 if data.endswith(b"\n") else len(lines), 1)
    stride = max(stride, -(-n_lines // _MAX_BLOCKS))
    # starts[i] = byte offset of line i (the last entry: the end of the data)
    cum = accumulate(map(len, lines))  # line i starts at (length of lines before it) + i newlines
    starts = [0, *map(add, cum, range(1, n_lines))]
    starts.append(len(data))
    blocks: list[Block] = []
    line = 0
    while line < n_lines:
        end = min(line + stride, n_lines)
        start_byte = starts[line]
        if starts[end] - start_byte > block_bytes:
            low, high = line + 1, end  # the last end whose block still fits (at least one line)
            while low < high:
                mid = (low + high + 1) // 2
                if starts[mid] - start_byte <= block_bytes:
                    low = mid
                else:
                    high = mid - 1
            end = low
        blocks.append(Block(line, end, start_byte, starts[end]))
        line = end
    return n_lines, blocks


def analyze(
    data: bytes, *, stride: int = 12, block_bytes: int = 2048, keywords: frozenset[str] = frozenset()
) -> Lexical:
    """Blocks, postings and identifiers of one file's bytes."""
    n_lines, blocks = _blocks(data, stride, block_bytes)
    findall = WORD.findall
    stopped = stopwords().intersection
    seen: set[bytes] = set()
    remember = seen.update
    keys: list = []
    counts: list = []
    lengths: list[int] = []
    for block in blocks:
        counter: dict[bytes, int] = {}
        _count_elements(counter, findall(data, block.start_byte, block.end_byte))
        remember(counter)
        for term in stopped(counter):
            del counter[term]
        keys.append(counter.keys())
        values = counter.values()
        counts.append(values)
        lengths.append(sum(values))
    terms = list(chain.from_iterable(keys))
    ids = {t: (_crc(t) << 32) | _crc(t, _SEED) for t in dict.fromkeys(terms)}
    tf_values = chain.from_iterable(counts)
    if lengths and max(lengths) > 0xFFFF:  # one giant line: clamp to 16 bits
        tf_values = map(min, tf_values, repeat(0xFFFF))
        lengths = [min(n, 0xFFFF) for n in lengths]
    identifiers = sorted(seen.difference(_encoded(keywords)))
    if identifiers and max(map(len, identifiers)) > _MAX_IDENTIFIER:
        identifiers = [t for t in identifiers if len(t) <= _MAX_IDENTIFIER]
    return Lexical(
        n_lines=n_lines,
        blocks=tuple(blocks),
        hashes=array("Q", map(ids.__getitem__, terms)).tobytes(),
        entry_blocks=array(
            "H", chain.from_iterable(map(repeat, range(len(blocks)), map(len, keys)))
        ).tobytes(),
        tfs=array("H", tf_values).tobytes(),
        block_lengths=array("H", lengths).tobytes(),
        total_length=sum(lengths),
        identifiers=tuple(identifiers),
    )
