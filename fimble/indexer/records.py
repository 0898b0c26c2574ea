"""How index entries are laid out in LMDB: sub-database names, keys and value encodings.

Writer and reader both go through this module and never import each other. Values are ``marshal``
tuples of plain types: the fastest (de)serialiser in the standard library and, unlike pickle, unable to
run code if someone tampers with the cache. Its format version is part of ``SCHEMA``, so a Python that
writes another format triggers a rebuild instead of misreading.

Sub-databases (fid = 4-byte big-endian file id; all paths workspace-relative UTF-8):

    meta    b"schema" -> SCHEMA;  b"stats" -> Stats;  b"ready" -> (done: bool, finished_at: float)
    files   path -> FileRecord                    paths   fid -> path
    defs    fid + idx(4) -> DefRecord             names   name -> fid + idx (dupsort, dupfixed)
    imports fid -> [(flavor, spec, names, line, wildcard)]
    idents  fid -> (identifier, ...)              text    fid -> file bytes as indexed
    windows fid -> [(start_line, end_line, start_byte, end_byte)]
    fterms  fid -> [(term, windows containing it)]
    post    term + b"\\0" + fid -> uint16 triples (window, tf, window length)
    df      term -> uint32 number of windows containing the term
    base    file name -> path (dupsort), for suffix resolution of includes and Java imports
    mods    directory -> Go module path declared by its go.mod
"""

from __future__ import annotations

import marshal
import struct
import sys
from typing import NamedTuple

__all__ = [
    "DB_NAMES",
    "DUPSORT",
    "MAX_KEY",
    "SCHEMA",
    "DefRecord",
    "FileRecord",
    "Stats",
    "def_key",
    "dumps",
    "fid_bytes",
    "fid_of",
    "loads",
    "post_key",
    "u32",
]

SCHEMA = f"fimble-index/1 marshal{marshal.version} {sys.byteorder}".encode()
DB_NAMES = (
    "meta",
    "files",
    "paths",
    "defs",
    "names",
    "imports",
    "idents",
    "text",
    "windows",
    "fterms",
    "post",
    "df",
    "base",
    "mods",
)
DUPSORT = {"names": {"dupsort": True, "dupfixed": True}, "base": {"dupsort": True}}
MAX_KEY = 500  # LMDB's compiled-in limit is 511 bytes, for keys and dupsort values alike

_FID = struct.Struct(">I")
_DEF = struct.Struct(">II")

dumps = marshal.dumps
loads = marshal.loads


def fid_bytes(fid: int) -> bytes:
    return _FID.pack(fid)


def fid_of(key: bytes) -> int:
    return _FID.unpack_from(key, len(key) - 4)[0]


def def_key(fid: int, idx: int) -> bytes:
    return _DEF.pack(fid, idx)


def post_key(term: bytes, fid4: bytes) -> bytes:
    return term + b"\0" + fid4


def u32(value: int) -> bytes:
    return _FID.pack(value)


class FileRecord(NamedTuple):
    fid: int
    size: int
    mtime_ns: int
    digest: bytes
    language: str
    n_lines: int
    n_defs: int
    n_windows: int
    total_length: int
    has_errors: bool

    def pack(self) -> bytes:
        return dumps(tuple(self))

    @classmethod
    def unpack(cls, raw: bytes) -> FileRecord:
        return cls(*loads(raw))


class DefRecord(NamedTuple):
    kind: str
    name: str
    qualname: str
    scope: str
    start_line: int
    start_col: int
    end_line: int
    end_col: int
    signature: str
    doc: str


class Stats(NamedTuple):
    """Counters kept in one meta entry, updated in the same transaction as the files they count."""

    next_fid: int = 1
    windows: int = 0
    total_length: int = 0
    definitions: int = 0
    generation: int = 0
    languages: tuple[tuple[str, int], ...] = ()

    def pack(self) -> bytes:
        return dumps(tuple(self))

    @classmethod
    def unpack(cls, raw: bytes | None) -> Stats:
        return cls(*loads(raw)) if raw else cls()
