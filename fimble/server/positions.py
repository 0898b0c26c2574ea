"""LSP positions <-> offsets into a Python ``str``: the one place where code units are counted.

LSP positions are (line, character) where ``character`` counts code units of the negotiated
encoding: UTF-16 by default (a CJK character is 1 unit, an emoji 2), UTF-8 (3 and 4 bytes) or UTF-32
(1 and 1). Python strings index code points, which is what every ``fimble.completion`` request takes.
Everything else in the server goes through ``LineIndex`` so that a position on a line with emoji or
CJK text lands where the client means.

Lines end at ``\\n``, ``\\r\\n`` or ``\\r``, as the LSP specification says (not at the other separators
``str.splitlines`` knows). A ``character`` past the end of its line means the end of the line (the
specification's rule); a position that splits a character in two is an error, because no editor
means it and guessing would put the suggestion one character off.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from enum import StrEnum

from fimble.errors import InputError

__all__ = [
    "Encoding",
    "LineIndex",
    "PositionError",
    "choose_encoding",
    "code_units",
    "index_to_units",
    "units_to_index",
]

_NEWLINE = re.compile(r"\r\n|\r|\n")


class PositionError(InputError):
    """A position that does not exist in the document (past its end, inside a character)."""


class Encoding(StrEnum):
    UTF8 = "utf-8"
    UTF16 = "utf-16"
    UTF32 = "utf-32"


def choose_encoding(offered: list[str] | None) -> Encoding:
    """UTF-8 when the client offers it (cheapest for both sides), else UTF-16, which every client
    must support; UTF-32 is only taken from a client that offers nothing else we know."""
    offered = list(offered or [])
    if Encoding.UTF8.value in offered:
        return Encoding.UTF8
    if Encoding.UTF16.value in offered or Encoding.UTF32.value not in offered:
        return Encoding.UTF16
    return Encoding.UTF32


def code_units(char: str, encoding: Encoding) -> int:
    """How many code units one code point takes (a lone surrogate counts as one UTF-16 unit)."""
    cp = ord(char)
    if encoding is Encoding.UTF16:
        return 2 if cp > 0xFFFF else 1
    if encoding is Encoding.UTF8:
        if cp < 0x80:
            return 1
        if cp < 0x800:
            return 2
        return 3 if cp < 0x10000 else 4
    return 1


def units_to_index(line: str, units: int, encoding: Encoding) -> int:
    """The code point index in ``line`` of a position ``units`` code units in; clamped to the end.

    Raises ``PositionError`` when ``units`` falls inside a character (half a surrogate pair, part of
    a UTF-8 sequence).
    """
    if units < 0:
        raise PositionError(f"character {units} is negative")
    if encoding is Encoding.UTF32 or line.isascii():
        return min(units, len(line))
    seen = 0
    for i, ch in enumerate(line):
        if seen == units:
            return i
        seen += code_units(ch, encoding)
        if seen > units:
            raise PositionError(
                f"character {units} ({encoding.value}) falls inside the character {ch!r} at index {i}"
            )
    return len(line)


def index_to_units(line: str, index: int, encoding: Encoding) -> int:
    """Code units before code point ``index`` of ``line``."""
    head = line[:index]
    if encoding is Encoding.UTF32 or head.isascii():
        return len(head)
    return sum(code_units(ch, encoding) for ch in head)


@dataclass(frozen=True)
class LineIndex:
    """Line starts of one text (code point offsets), built once per document version."""

    text: str
    starts: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        starts = [0]
        starts.extend(m.end() for m in _NEWLINE.finditer(self.text))
        object.__setattr__(self, "starts", tuple(starts))

    @property
    def line_count(self) -> int:
        return len(self.starts)

    def line_text(self, line: int) -> str:
        """Line ``line`` without its line ending."""
        start = self.starts[line]
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        text = self.text[start:end]
        if text.endswith("\r\n"):
            return text[:-2]
        return text[:-1] if text.endswith(("\n", "\r")) else text

    def offset(self, line: int, character: int, encoding: Encoding, *, clamp_end: bool = False) -> int:
        """Code point offset of an LSP position.

        ``clamp_end`` maps a line past the end to the end of the text; edit ranges need it, because
        clients often express "to the end" as (line count, 0). A cursor past the end is an error.
        """
        if line < 0:
            raise PositionError(f"line {line} is negative")
        if line >= len(self.starts):
            if clamp_end:
                return len(self.text)
            raise PositionError(f"line {line} is past the end of the document ({len(self.starts)} lines)")
        text = self.line_text(line)
        return self.starts[line] + units_to_index(text, character, encoding)

    def position(self, offset: int, encoding: Encoding) -> tuple[int, int]:
        """LSP (line, character) of a code point offset (clamped into the text)."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        text = self.line_text(line)
        return line, index_to_units(text, offset - self.starts[line], encoding)
