"""Open documents as immutable snapshots, kept in step with the editor by full and incremental edits.

A request takes the snapshot current when it arrives and keeps it while it awaits the model, so a
``didChange`` arriving meanwhile never shows it a half-applied edit (ruff's copy-on-write documents).
Text that is not valid Unicode (lone UTF-16 surrogates, which JSON allows) is stored with U+FFFD in
their place: the same number of code units in every encoding, so positions stay where they were.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from fimble.errors import InputError
from fimble.server.positions import Encoding, LineIndex

__all__ = [
    "MAX_DOCUMENT_CHARS",
    "Change",
    "Document",
    "DocumentTooLarge",
    "Documents",
    "UnknownDocument",
    "scrub",
]

# Past this, completing is refused: the editor is showing a data file, not code someone types.
MAX_DOCUMENT_CHARS = 8 * 1024 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")


class UnknownDocument(InputError):
    """A request names a document the client never opened."""


class DocumentTooLarge(InputError):
    """The document is past ``MAX_DOCUMENT_CHARS``."""


def scrub(text: str) -> str:
    """Replace lone surrogates with U+FFFD (one code unit for one, in UTF-16 and UTF-32)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


@dataclass(frozen=True)
class Change:
    """One content change: ``range`` as ((line, char), (line, char)) or None for the whole text."""

    text: str
    range: tuple[tuple[int, int], tuple[int, int]] | None = None


@dataclass(frozen=True)
class Document:
    uri: str
    text: str
    version: int = 0
    language_id: str = ""

    @cached_property
    def lines(self) -> LineIndex:
        return LineIndex(self.text)

    def offset(self, line: int, character: int, encoding: Encoding) -> int:
        """Code point offset of a cursor; raises ``PositionError`` past the end of the document."""
        return self.lines.offset(line, character, encoding)

    def check_size(self) -> None:
        if len(self.text) > MAX_DOCUMENT_CHARS:
            raise DocumentTooLarge(
                f"{self.uri} has {len(self.text)} characters, past fimble's limit of "
                f"{MAX_DOCUMENT_CHARS}; no completions in it"
            )

    def apply(self, changes: Iterable[Change], version: int, encoding: Encoding) -> Document:
        """A new snapshot with ``changes`` applied in order (each against the result of the last)."""
        text = self.text
        lines: LineIndex | None = self.lines if "lines" in self.__dict__ else None
        for change in changes:
            new = scrub(change.text)
            if change.range is None:
                text, lines = new, None
                continue
            lines = lines if lines is not None and lines.text is text else LineIndex(text)
            (l0, c0), (l1, c1) = change.range
            start = lines.offset(l0, c0, encoding, clamp_end=True)
            end = lines.offset(l1, c1, encoding, clamp_end=True)
            if end < start:
                start, end = end, start
            text = text[:start] + new + text[end:]
            lines = None
        return Document(self.uri, text, version, self.language_id)


class Documents:
    """The documents one client has open, by URI."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, uri: object) -> bool:
        return uri in self._docs

    def open(self, uri: str, text: str, version: int, language_id: str) -> Document:
        doc = Document(uri, scrub(text), version, language_id)
        self._docs[uri] = doc
        return doc

    def change(self, uri: str, version: int, changes: Iterable[Change], encoding: Encoding) -> Document:
        doc = self.get(uri).apply(changes, version, encoding)
        self._docs[uri] = doc
        return doc

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def get(self, uri: str) -> Document:
        try:
            return self._docs[uri]
        except KeyError:
            raise UnknownDocument(f"{uri} is not open: send textDocument/didOpen first") from None

    def find(self, uri: str) -> Document | None:
        return self._docs.get(uri)
