"""Positions: code units of each encoding <-> code points, on lines with emoji, CJK and CRLF."""

from __future__ import annotations

import pytest

from fimble.server.positions import (
    Encoding,
    LineIndex,
    PositionError,
    choose_encoding,
    index_to_units,
    units_to_index,
)

LINE = 'x = "日本😀" + y'  # CJK: 1 UTF-16 unit / 3 bytes; emoji: 2 units / 4 bytes


def _units(text: str, encoding: Encoding) -> int:
    if encoding is Encoding.UTF16:
        return len(text.encode("utf-16-le")) // 2
    if encoding is Encoding.UTF8:
        return len(text.encode("utf-8"))
    return len(text)


@pytest.mark.parametrize("encoding", list(Encoding))
def test_every_character_boundary_round_trips(encoding: Encoding) -> None:
    for index in range(len(LINE) + 1):
        units = _units(LINE[:index], encoding)
        assert index_to_units(LINE, index, encoding) == units
        assert units_to_index(LINE, units, encoding) == index


def test_utf16_position_inside_a_surrogate_pair_is_an_error() -> None:
    emoji_start = _units(LINE[: LINE.index("😀")], Encoding.UTF16)
    with pytest.raises(PositionError, match="inside"):
        units_to_index(LINE, emoji_start + 1, Encoding.UTF16)


def test_utf8_position_inside_a_multibyte_character_is_an_error() -> None:
    cjk_start = _units(LINE[: LINE.index("日")], Encoding.UTF8)
    with pytest.raises(PositionError):
        units_to_index(LINE, cjk_start + 1, Encoding.UTF8)


def test_character_past_the_end_of_the_line_means_the_end() -> None:
    assert units_to_index(LINE, 999, Encoding.UTF16) == len(LINE)
    assert units_to_index("abc", 999, Encoding.UTF8) == 3


def test_lone_surrogate_counts_as_one_utf16_unit() -> None:
    line = "a\ud800b"
    assert units_to_index(line, 2, Encoding.UTF16) == 2
    assert index_to_units(line, 3, Encoding.UTF16) == 3


def test_line_index_handles_lf_crlf_and_cr() -> None:
    text = "one\r\ntwo\rthree\nfour"
    lines = LineIndex(text)
    assert lines.line_count == 4
    assert [lines.line_text(i) for i in range(4)] == ["one", "two", "three", "four"]
    assert lines.offset(1, 1, Encoding.UTF16) == text.index("two") + 1
    assert lines.offset(0, 99, Encoding.UTF16) == 3  # clamped before the \r\n
    assert lines.position(text.index("four") + 2, Encoding.UTF16) == (3, 2)


def test_offsets_and_positions_on_emoji_lines() -> None:
    text = "first 😀 line\n" + LINE
    lines = LineIndex(text)
    at = text.index("+")
    for encoding in Encoding:
        line, char = lines.position(at, encoding)
        assert (line, char) == (1, _units(LINE[: LINE.index("+")], encoding))
        assert lines.offset(line, char, encoding) == at


def test_line_past_the_end_is_an_error_unless_clamped() -> None:
    lines = LineIndex("a\nb")
    with pytest.raises(PositionError, match="past the end"):
        lines.offset(2, 0, Encoding.UTF16)
    assert lines.offset(2, 0, Encoding.UTF16, clamp_end=True) == 3
    with pytest.raises(PositionError):
        lines.offset(-1, 0, Encoding.UTF16)


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (None, Encoding.UTF16),
        ([], Encoding.UTF16),
        (["utf-16"], Encoding.UTF16),
        (["utf-16", "utf-8"], Encoding.UTF8),
        (["utf-8", "utf-16", "utf-32"], Encoding.UTF8),
        (["utf-32"], Encoding.UTF32),
        (["latin-1"], Encoding.UTF16),
    ],
)
def test_encoding_negotiation(offered: list[str] | None, chosen: Encoding) -> None:
    assert choose_encoding(offered) is chosen
