"""Lexical analysis of a file: blocks of lines, their BM25 terms, and the words of a query.

Terms are case-sensitive identifiers (code spells a name the same way everywhere): a word is a run of
``[A-Za-z0-9_]`` that starts with a letter or ``_`` (a run starting with a digit is a number);
non-ASCII bytes separate words, so invalid UTF-8 costs nothing. The stop words in
``data/stopwords.toml`` are not terms. Cutting a file into blocks and postings runs on every byte of
the workspace and is done with numpy in ``terms.analyze`` (imported only by whoever indexes); this
module, what the readers need, stays light.

A file is cut into *blocks* of ``stride`` lines (capped in bytes, so minified one-line files still
split); a retrieval *window* is two consecutive blocks, so windows overlap their neighbours by half.
Postings are kept per block and windows are scored from them at query time (bm25.py): half the
entries of per-window postings, same ranking.

A term's id is a 64-bit hash whose low 16 bits are zero (48 bits of hash, so ``id | block`` is one
sortable integer; ``term_ids``), stable across processes and machines of the same byte order;
``term_hash`` computes the same value in plain Python for query terms. Two terms sharing an id (about
one pair in 10^8 among a million distinct terms) merely share postings.

The identifiers a file uses are not stored: ``identifiers`` derives them from the stored text when
asked (no query on the completion path needs them).
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import NamedTuple

from fimble.indexer.term_ids import C0, C1, C2, ID_MASK, MASK64

__all__ = ["Block", "Lexical", "identifiers", "query_terms", "stopwords", "term_hash", "words"]

WORD = re.compile(rb"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*")
_MAX_IDENTIFIER = 64


class Block(NamedTuple):
    """Lines [start_line, end_line) at bytes [start_byte, end_byte): the layout of the plain tuples in
    ``Lexical.blocks`` and in the store."""

    start_line: int
    end_line: int
    start_byte: int
    end_byte: int


@dataclass(frozen=True, slots=True)
class Lexical:
    """Postings as parallel arrays, one entry per (term, block), sorted by (term id, block):
    ``hashes`` (uint64 term ids), ``entry_blocks`` and ``tfs`` (uint16), plus ``block_lengths``
    (terms per block, uint16). ``blocks`` are plain tuples laid out as ``Block`` (a file has thousands:
    named tuples would cost more to build than everything else about them)."""

    n_lines: int
    blocks: list[tuple[int, int, int, int]]
    hashes: bytes
    entry_blocks: bytes
    tfs: bytes
    block_lengths: bytes
    total_length: int


def term_hash(term: bytes | bytearray) -> int:
    """The id of a term: the same value ``terms.analyze`` computes with numpy, in every process."""
    n = len(term)
    h = (n * C0) & MASK64
    padded = bytes(term) + bytes(-n % 8)
    for k in range(0, max(n, 1), 8):
        h = ((h ^ int.from_bytes(padded[k : k + 8], "little")) * C1) & MASK64
        h ^= h >> 29
    h ^= h >> 32
    h = (h * C2) & MASK64
    h ^= h >> 29
    return h & ID_MASK


@functools.cache
def stopwords() -> frozenset[bytes]:
    """Stop words as listed, Capitalised and UPPER, plus single characters."""
    text = resources.files("fimble.indexer.data").joinpath("stopwords.toml").read_text("utf-8")
    listed = tomllib.loads(text)["words"].split()
    forms = {f for w in listed for f in (w, w.capitalize(), w.upper())}
    forms |= {chr(c) for c in range(ord("a"), ord("z") + 1)} | {chr(c) for c in range(ord("A"), ord("Z") + 1)}
    forms.add("_")
    return frozenset(f.encode() for f in forms)


def words(data: bytes) -> list[bytes]:
    """Identifier-like words in order (case kept)."""
    return WORD.findall(data)


def query_terms(text: str | bytes) -> list[bytes]:
    """The distinct BM25 terms of a query, in first-seen order."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    stop = stopwords()
    return [t for t in dict.fromkeys(WORD.findall(data)) if t not in stop]


def identifiers(data: bytes, keywords: frozenset[str] = frozenset()) -> tuple[bytes, ...]:
    """The distinct words of a file, sorted, without the language's keywords and overlong words."""
    skip = {k.encode() for k in keywords}
    return tuple(sorted(w for w in set(WORD.findall(data)) if len(w) <= _MAX_IDENTIFIER and w not in skip))
