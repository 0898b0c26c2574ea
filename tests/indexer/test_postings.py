"""Segment postings: numpy build, bucket encoding, parsing and merging."""

from __future__ import annotations

from array import array

import numpy as np

from fimble.indexer import postings
from fimble.indexer.lexical import term_hash
from fimble.indexer.terms import analyze


def _doc(fid: int, text: bytes):
    lex = analyze(text, stride=2)
    return fid, lex.hashes, lex.entry_blocks, lex.tfs, lex.block_lengths


def _lookup(values: dict[int, bytes], term: bytes) -> list[tuple[int, int, int]]:
    term_id = term_hash(term)
    value = values.get(postings.bucket_of(term_id))
    if value is None:
        return []
    parsed = postings.parse(value)
    hit = parsed.find(term_id)
    if hit is None:
        return []
    return list(
        zip(parsed.fids[hit].tolist(), parsed.blocks[hit].tolist(), parsed.tfs[hit].tolist(), strict=True)
    )


def test_roundtrip() -> None:
    cols = postings.build([_doc(1, b"alpha beta\ngamma\nalpha alpha\n"), _doc(2, b"beta\n\nbeta beta\n")])
    values = dict(postings.encode(cols))
    assert len(values) <= postings.N_BUCKETS
    assert _lookup(values, b"alpha") == [(1, 0, 1), (1, 1, 2)]
    assert _lookup(values, b"beta") == [(1, 0, 1), (2, 0, 1), (2, 1, 2)]
    assert _lookup(values, b"delta") == []
    for value in values.values():
        parsed = postings.parse(value)
        assert np.all(np.diff(parsed.hashes.astype(np.float64)) > 0)  # sorted, unique term ids
        assert parsed.starts[-1] == len(parsed.fids)


def test_lengths_travel_with_entries() -> None:
    cols = postings.build([_doc(7, b"one two three\nfour\nfive\n")])
    lengths = array("H")
    lengths.frombytes(analyze(b"one two three\nfour\nfive\n", stride=2).block_lengths)
    assert list(lengths) == [4, 1]
    by_block = dict(zip(cols.blocks.tolist(), cols.lens.tolist(), strict=False))
    assert by_block == {0: 4, 1: 1}


def test_merge_drops_dead_fids() -> None:
    a = dict(postings.encode(postings.build([_doc(1, b"alpha\n"), _doc(2, b"alpha beta\n")])))
    b = dict(postings.encode(postings.build([_doc(3, b"alpha\n")])))
    bucket = postings.bucket_of(term_hash(b"alpha"))
    merged = postings.merge([a[bucket], b[bucket]], np.asarray([2], np.uint32))
    assert _lookup({bucket: merged}, b"alpha") == [(1, 0, 1), (3, 0, 1)]
    gone = postings.merge([b[bucket]], np.asarray([3], np.uint32))
    assert gone is None


def test_empty() -> None:
    assert postings.encode(postings.build([])) == []
    assert postings.encode(postings.build([_doc(1, b"")])) == []


def test_find_terms_agrees_with_parse() -> None:
    docs = [_doc(fid, b"".join(b"w%d x%d\n" % (i * fid % 37, i) for i in range(60))) for fid in (1, 2, 5)]
    values = dict(postings.encode(postings.build(docs)))
    for value in values.values():
        parsed = postings.parse(value)
        ids = [int(h) for h in parsed.hashes] + [term_hash(b"absent_zz"), 0, (1 << 64) - (1 << 16)]
        for term_id, got in zip(ids, postings.find_terms(value, ids), strict=True):
            hit = parsed.find(term_id)
            if hit is None:
                assert got is None
            else:
                expected = (parsed.fids[hit], parsed.blocks[hit], parsed.tfs[hit], parsed.lens[hit])
                assert got is not None
                assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
