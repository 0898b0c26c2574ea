"""Which language a file is, and the per-language facts the parser needs (read from data/languages.toml).

Nothing here imports tree-sitter: the walker and the writer use these facts without paying for grammar
loading, which only ``parse.py`` does, lazily, per process.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources

__all__ = ["TEXT", "LanguageSpec", "detect_language", "language_spec", "parsed_languages"]

TEXT = "text"
"""The language of every file no grammar covers: indexed for lexical search only."""


@dataclass(frozen=True, slots=True)
class LanguageSpec:
    """Facts about one tree-sitter language; see the header of data/languages.toml for each field."""

    name: str
    extensions: tuple[str, ...]
    grammar: str
    queries: tuple[str, ...]  # .scm files, concatenated into one query
    max_depth: int
    comments: frozenset[str]
    wrappers: frozenset[str]
    doc_skip: frozenset[str]
    keywords: frozenset[str]
    separator: str = "."
    shebangs: tuple[str, ...] = ()
    filenames: tuple[str, ...] = ()
    skeleton: bool = False  # parse function bodies blanked (skeleton.py); Python only


@dataclass(frozen=True, slots=True)
class _Table:
    specs: dict[str, LanguageSpec]
    by_extension: dict[str, str]
    by_filename: dict[str, str]
    by_shebang: dict[str, str]
    header_ext: str
    header_cpp: re.Pattern[bytes]


@functools.cache
def _table() -> _Table:
    raw = tomllib.loads(resources.files("fimble.indexer.data").joinpath("languages.toml").read_text("utf-8"))
    sniff = raw.pop("header_sniff")
    specs: dict[str, LanguageSpec] = {}
    by_ext: dict[str, str] = {}
    by_name: dict[str, str] = {}
    by_shebang: dict[str, str] = {}
    for name, fields in raw.items():
        spec = LanguageSpec(
            name=name,
            extensions=tuple(fields["extensions"]),
            grammar=fields["grammar"],
            queries=(fields["query"],) if isinstance(fields["query"], str) else tuple(fields["query"]),
            max_depth=int(fields["max_depth"]),
            comments=frozenset(fields.get("comments", ())),
            wrappers=frozenset(fields.get("wrappers", ())),
            doc_skip=frozenset(fields.get("doc_skip", ())),
            keywords=frozenset(fields.get("keywords", ())),
            separator=fields.get("separator", "."),
            shebangs=tuple(fields.get("shebangs", ())),
            filenames=tuple(fields.get("filenames", ())),
            skeleton=bool(fields.get("skeleton", False)),
        )
        specs[name] = spec
        by_ext.update(dict.fromkeys(spec.extensions, name))
        by_name.update(dict.fromkeys(spec.filenames, name))
        by_shebang.update(dict.fromkeys(spec.shebangs, name))
    return _Table(
        specs=specs,
        by_extension=by_ext,
        by_filename=by_name,
        by_shebang=by_shebang,
        header_ext=sniff["extension"],
        header_cpp=re.compile(sniff["cpp_pattern"].encode(), re.MULTILINE),
    )


def language_spec(name: str) -> LanguageSpec | None:
    """The spec of a parsed language, or None for plain text (and unknown names)."""
    return _table().specs.get(name)


def parsed_languages() -> tuple[str, ...]:
    """Every language that has a grammar and a query."""
    return tuple(_table().specs)


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def detect_language(name: str, head: bytes = b"") -> str:
    """The language of a file from its name and, for headers and scripts, its first bytes.

    ``head`` is the start of the content (a few KiB is enough); without it a ``.h`` file is C and an
    extension-less script is text.
    """
    table = _table()
    base = name.rsplit("/", 1)[-1]
    if base in table.by_filename:
        return table.by_filename[base]
    ext = _suffix(base)
    if ext == table.header_ext:
        return "cpp" if head and table.header_cpp.search(head[:16384]) else table.by_extension.get(ext, TEXT)
    if ext in table.by_extension:
        return table.by_extension[ext]
    if not ext and head.startswith(b"#!"):
        first = head.split(b"\n", 1)[0].decode("latin-1")
        words = first[2:].replace("/", " ").split()
        for word in reversed(words):
            lang = table.by_shebang.get(re.sub(r"[\d.]+$", "", word)) or table.by_shebang.get(word)
            if lang:
                return lang
    return TEXT
