"""The BM25 postings table: immutable segments of hash-bucketed, columnar postings (numpy).

An inverted index keyed by (term, file) costs one LMDB put per distinct term of every file: half a
million puts for CPython's stdlib, the slowest part of a full build. Here a write batch becomes one
*segment*: its postings are sorted by term id with numpy and split into at most ``N_BUCKETS`` values,
keyed ``bucket(2) + segment(4)``. A query reads, per term, the term's bucket in each segment
(``len(segments)`` keys, kept small by compaction) and binary-searches the term there.

Value layout (native byte order, every array aligned to its item size)::

    u32 n_terms, u32 n_entries
    u64 hashes[n_terms]        sorted term ids (lexical.term_hash)
    u32 starts[n_terms + 1]    entry range of each term
    u32 fids[n_entries]        then u16 blocks, u16 tfs, u16 lens[n_entries]

Entries are sorted by (term, fid, block). Stale entries (older versions of a file) stay until
compaction rewrites the segment; queries mask them with the ``dead`` fid list.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BUCKET_BITS",
    "N_BUCKETS",
    "Columns",
    "Postings",
    "bucket_of",
    "build",
    "encode",
    "find_terms",
    "merge",
    "parse",
]

BUCKET_BITS = 11
N_BUCKETS = 1 << BUCKET_BITS
_SHIFT = np.uint64(64 - BUCKET_BITS)
_HEADER = struct.Struct("<II")
_RANGE = struct.Struct("<II")  # one term's (start, end) in ``starts``


def bucket_of(term_id: int) -> int:
    return term_id >> (64 - BUCKET_BITS)


@dataclass(slots=True)
class Columns:
    """Postings as parallel arrays, sorted by (hash, fid, block)."""

    hashes: np.ndarray  # uint64, one per entry
    fids: np.ndarray  # uint32
    blocks: np.ndarray  # uint16
    tfs: np.ndarray  # uint16
    lens: np.ndarray  # uint16

    def __len__(self) -> int:
        return len(self.fids)

    def take(self, index: np.ndarray) -> Columns:
        return Columns(
            self.hashes[index], self.fids[index], self.blocks[index], self.tfs[index], self.lens[index]
        )


@dataclass(slots=True)
class Postings:
    """A parsed bucket value (views into the value's bytes)."""

    hashes: np.ndarray
    starts: np.ndarray
    fids: np.ndarray
    blocks: np.ndarray
    tfs: np.ndarray
    lens: np.ndarray

    def find(self, term_id: int) -> slice | None:
        i = int(np.searchsorted(self.hashes, np.uint64(term_id)))
        if i < len(self.hashes) and int(self.hashes[i]) == term_id:
            return slice(int(self.starts[i]), int(self.starts[i + 1]))
        return None

    def columns(self) -> Columns:
        counts = np.diff(self.starts.astype(np.int64))
        return Columns(np.repeat(self.hashes, counts), self.fids, self.blocks, self.tfs, self.lens)


def build(docs: Iterable[tuple[int, bytes, bytes, bytes, bytes]]) -> Columns:
    """Columns for ``(fid, hashes, blocks, tfs, block_lengths)`` of files given in increasing fid
    order (entries of one file come sorted by (term, block), so a stable sort by hash finishes the
    job)."""
    hs, fs, bs, ts, ls = [], [], [], [], []
    for fid, hashes, blocks, tfs, block_lengths in docs:
        h = np.frombuffer(hashes, np.uint64)
        if not len(h):
            continue
        b = np.frombuffer(blocks, np.uint16)
        hs.append(h)
        fs.append(np.full(len(h), fid, np.uint32))
        bs.append(b)
        ts.append(np.frombuffer(tfs, np.uint16))
        ls.append(np.frombuffer(block_lengths, np.uint16)[b])
    if not hs:
        empty16 = np.empty(0, np.uint16)
        return Columns(np.empty(0, np.uint64), np.empty(0, np.uint32), empty16, empty16, empty16)
    cols = Columns(
        np.concatenate(hs), np.concatenate(fs), np.concatenate(bs), np.concatenate(ts), np.concatenate(ls)
    )
    return cols.take(np.argsort(cols.hashes, kind="stable"))


def encode(cols: Columns) -> list[tuple[int, bytes]]:
    """Split sorted columns into (bucket, value) pairs, one per non-empty bucket."""
    n = len(cols)
    if not n:
        return []
    h = cols.hashes
    starts = np.concatenate(([0], np.flatnonzero(h[1:] != h[:-1]) + 1, [n])).astype(np.int64)
    term_ids = h[starts[:-1]]
    term_buckets = (term_ids >> _SHIFT).astype(np.int64)
    bucket_starts = np.searchsorted(term_buckets, np.arange(N_BUCKETS + 1)).tolist()
    raw_ids = term_ids.tobytes()
    raw_f, raw_b, raw_t, raw_l = (a.tobytes() for a in (cols.fids, cols.blocks, cols.tfs, cols.lens))
    entry_starts = starts.tolist()
    out: list[tuple[int, bytes]] = []
    for bucket in np.flatnonzero(np.diff(bucket_starts)).tolist():
        a, z = bucket_starts[bucket], bucket_starts[bucket + 1]
        ea, ez = entry_starts[a], entry_starts[z]
        value = b"".join(
            (
                _HEADER.pack(z - a, ez - ea),
                raw_ids[8 * a : 8 * z],
                (starts[a : z + 1] - ea).astype(np.uint32).tobytes(),
                raw_f[4 * ea : 4 * ez],
                raw_b[2 * ea : 2 * ez],
                raw_t[2 * ea : 2 * ez],
                raw_l[2 * ea : 2 * ez],
            )
        )
        out.append((bucket, value))
    return out


def _layout(value: bytes) -> tuple[int, int, int, int, int]:
    """(terms, entries, and where ``starts``, ``fids`` and ``blocks`` begin) of a bucket value; the
    hashes begin at 8, and ``tfs``/``lens`` follow ``blocks`` at 2 bytes per entry each."""
    n_terms, n = _HEADER.unpack_from(value)
    starts_at = 8 + 8 * n_terms
    fids_at = starts_at + 4 * (n_terms + 1)
    return n_terms, n, starts_at, fids_at, fids_at + 4 * n


def parse(value: bytes) -> Postings:
    n_terms, n, starts_at, fids_at, blocks_at = _layout(value)
    hashes = np.frombuffer(value, np.uint64, n_terms, 8)
    starts = np.frombuffer(value, np.uint32, n_terms + 1, starts_at)
    fids = np.frombuffer(value, np.uint32, n, fids_at)
    blocks = np.frombuffer(value, np.uint16, n, blocks_at)
    tfs = np.frombuffer(value, np.uint16, n, blocks_at + 2 * n)
    lens = np.frombuffer(value, np.uint16, n, blocks_at + 4 * n)
    return Postings(hashes, starts, fids, blocks, tfs, lens)


def find_terms(value: bytes, term_ids: list[int]) -> list[tuple[np.ndarray, ...] | None]:
    """Per term id, its (fids, blocks, tfs, lens) entries in a bucket value, or None: what
    ``parse(value).find`` gives, reading only the term ids and the entries of the terms found (a
    query looks up a few terms in every segment's bucket and misses in most of them)."""
    n_terms, n, starts_at, fids_at, blocks_at = _layout(value)
    hashes = np.frombuffer(value, np.uint64, n_terms, 8)
    out: list[tuple[np.ndarray, ...] | None] = []
    for term_id in term_ids:
        i = int(np.searchsorted(hashes, np.uint64(term_id)))
        if i == n_terms or int(hashes[i]) != term_id:
            out.append(None)
            continue
        start, end = _RANGE.unpack_from(value, starts_at + 4 * i)
        count = end - start
        out.append(
            (
                np.frombuffer(value, np.uint32, count, fids_at + 4 * start),
                np.frombuffer(value, np.uint16, count, blocks_at + 2 * start),
                np.frombuffer(value, np.uint16, count, blocks_at + 2 * n + 2 * start),
                np.frombuffer(value, np.uint16, count, blocks_at + 4 * n + 2 * start),
            )
        )
    return out


def merge(values: list[bytes], dead: np.ndarray) -> bytes | None:
    """One bucket value from several segments' values, without the entries of ``dead`` fids."""
    parts = [parse(v).columns() for v in values]
    cols = Columns(*(np.concatenate([getattr(p, f) for p in parts]) for f in Columns.__slots__))
    if len(dead):
        cols = cols.take(~np.isin(cols.fids, dead))
    if not len(cols):
        return None
    cols = cols.take(np.lexsort((cols.blocks, cols.fids, cols.hashes)))
    encoded = encode(cols)
    assert len(encoded) == 1, "a bucket value holds one bucket"
    return encoded[0][1]
