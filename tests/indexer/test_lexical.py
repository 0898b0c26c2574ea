"""Blocks, postings arrays, identifiers and term ids."""

from __future__ import annotations

from array import array

from fimble.indexer.lexical import Block, identifiers, query_terms, stopwords, term_hash, words
from fimble.indexer.terms import analyze


def _postings(lex) -> dict[int, list[tuple[int, int]]]:
    hashes, blocks, tfs = array("Q"), array("H"), array("H")
    hashes.frombytes(lex.hashes)
    blocks.frombytes(lex.entry_blocks)
    tfs.frombytes(lex.tfs)
    out: dict[int, list[tuple[int, int]]] = {}
    for h, b, t in zip(hashes, blocks, tfs, strict=True):
        out.setdefault(h, []).append((b, t))
    return out


def test_blocks_by_lines() -> None:
    data = b"".join(b"line%d = %d\n" % (i, i) for i in range(30))
    lex = analyze(data, stride=12)
    assert lex.n_lines == 30
    blocks = [Block._make(b) for b in lex.blocks]
    assert [(b.start_line, b.end_line) for b in blocks] == [(0, 12), (12, 24), (24, 30)]
    assert blocks[1].start_byte == data.index(b"line12") and blocks[-1].end_byte == len(data)


def test_blocks_capped_in_bytes() -> None:
    data = b"x" * 5000 + b"\nshort\nlines\nhere\n"
    lex = analyze(data, stride=12, block_bytes=100)
    assert lex.blocks[0] == Block(0, 1, 0, 5001)  # one oversized line stays whole
    assert all(end - start <= 100 for _, _, start, end in lex.blocks[1:])


def test_postings_tf_and_lengths() -> None:
    data = b"alpha beta alpha\n" * 3 + b"gamma\n" * 12
    lex = analyze(data, stride=3)
    post = _postings(lex)
    assert post[term_hash(b"alpha")] == [(0, 6)]
    assert post[term_hash(b"gamma")] == [(1, 3), (2, 3), (3, 3), (4, 3)]
    lengths = array("H")
    lengths.frombytes(lex.block_lengths)
    assert list(lengths) == [9, 3, 3, 3, 3] and lex.total_length == 21


def test_stopwords_and_single_letters_are_not_terms() -> None:
    lex = analyze(b"def self return x i alpha None\n")
    assert set(_postings(lex)) == {term_hash(b"alpha")}
    assert {b"self", b"Self", b"SELF", b"x", b"_"} <= stopwords()


def test_identifiers_keep_case_and_drop_keywords() -> None:
    found = identifiers(b"def make(User, user): return self.name\n", frozenset({"def", "return", "self"}))
    assert found == (b"User", b"make", b"name", b"user")


def test_a_word_starts_with_a_letter_or_underscore() -> None:
    assert words(b"x1 9abc 0x1F _y2 caf\xe9 \xffz") == [b"x1", b"_y2", b"caf", b"z"]
    lex = analyze(b"9abc alpha0 0x1F\n")
    assert set(_postings(lex)) == {term_hash(b"alpha0")}


def test_numpy_ids_match_term_hash() -> None:
    # analyze hashes 8 bytes at a time with numpy; term_hash (queries) must give the same ids
    vocab = [b"ab", b"abcdefgh", b"abcdefghi", b"a" * 17, b"_" * 64, b"x" * 200, b"Zz9_" * 5]
    lex = analyze(b" ".join(vocab) + b"\n")
    assert set(_postings(lex)) == {term_hash(w) for w in vocab}


def test_invalid_utf8_and_empty() -> None:
    assert analyze(b"").blocks == [Block(0, 1, 0, 0)]
    lex = analyze(b"caf\xe9 \xff\xfe token\n")
    assert term_hash(b"token") in _postings(lex)


def test_term_hash_is_stable() -> None:
    # Stored ids must not depend on the process: these values are part of the on-disk format.
    assert term_hash(b"make_user") == term_hash(bytearray(b"make_user"))
    assert term_hash(b"a") != term_hash(b"b")
    assert term_hash(b"make_user") == 0x8B490443914C0000
    assert term_hash(b"User") == 0xE702E86BB20E0000
    assert term_hash(b"User") & 0xFFFF == 0  # the low 16 bits hold the block number when sorting


def test_query_terms() -> None:
    assert query_terms("def make_user(name, age):\n    return User(name)") == [
        b"make_user",
        b"name",
        b"age",
        b"User",
    ]
    assert query_terms("") == []


def test_stop_word_ids_are_their_term_hashes() -> None:
    from fimble.indexer.terms import _stop_ids

    assert sorted(_stop_ids().tolist()) == sorted({term_hash(w) for w in stopwords()})
