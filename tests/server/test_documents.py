"""Documents: incremental edits in every encoding, snapshots, lone surrogates, size limit."""

from __future__ import annotations

import pytest

from fimble.server.documents import (
    MAX_DOCUMENT_CHARS,
    Change,
    Document,
    Documents,
    DocumentTooLarge,
    UnknownDocument,
    scrub,
)
from fimble.server.positions import Encoding, PositionError


def test_incremental_edit_after_emoji_in_each_encoding() -> None:
    text = 'a = "😀日"\nb = 1\n'
    for encoding, col in ((Encoding.UTF16, 8), (Encoding.UTF8, 12), (Encoding.UTF32, 7)):
        doc = Document("file:///x.py", text)
        # Replace the closing quote on line 0 (after the emoji and the CJK character).
        new = doc.apply([Change("'", ((0, col), (0, col + 1)))], 2, encoding)
        assert new.text == "a = \"😀日'\nb = 1\n", encoding
        assert new.version == 2
        assert doc.text == text  # the old snapshot is untouched


def test_changes_apply_in_order_and_full_replacement_resets() -> None:
    doc = Document("u", "hello")
    new = doc.apply([Change("J", ((0, 0), (0, 1))), Change("!", ((0, 5), (0, 5)))], 1, Encoding.UTF16)
    assert new.text == "Jello!"
    assert doc.apply([Change("x = 1\n"), Change("y", ((0, 0), (0, 1)))], 2, Encoding.UTF16).text == "y = 1\n"


def test_range_past_the_end_is_clamped_for_edits() -> None:
    doc = Document("u", "a\nb\n")
    assert doc.apply([Change("", ((1, 0), (9, 0)))], 1, Encoding.UTF16).text == "a\n"


def test_edit_inside_a_surrogate_pair_is_refused() -> None:
    doc = Document("u", "😀")
    with pytest.raises(PositionError):
        doc.apply([Change("x", ((0, 1), (0, 1)))], 1, Encoding.UTF16)


def test_lone_surrogates_become_replacement_characters() -> None:
    assert scrub("ok") == "ok"
    assert scrub("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert scrub("😀") == "😀"
    docs = Documents()
    doc = docs.open("u", "x\ud83d", 1, "python")
    assert doc.text == "x\ufffd"
    doc = docs.change("u", 2, [Change("\udc00", ((0, 2), (0, 2)))], Encoding.UTF16)
    assert doc.text == "x\ufffd\ufffd"
    doc.text.encode("utf-8")  # encodable: safe for the tokenizer and JSON


def test_unknown_document_and_size_limit() -> None:
    docs = Documents()
    with pytest.raises(UnknownDocument, match="didOpen"):
        docs.get("file:///nope.py")
    big = docs.open("big", "x" * (MAX_DOCUMENT_CHARS + 1), 1, "python")
    with pytest.raises(DocumentTooLarge):
        big.check_size()
    docs.close("big")
    assert "big" not in docs
