"""How index entries are laid out in LMDB: sub-database names, keys and value encodings.

Writer and reader both go through this module and never import each other. Values are ``marshal``
tuples of plain types: the fastest (de)serialiser in the standard library and, unlike pickle, unable to
run code if someone tampers with the cache. Its format version and the byte order (postings are raw
machine integers) are part of ``SCHEMA``: a mismatch rebuilds instead of misreading.

A file gets a new *fid* (4-byte big-endian file id) for every version of its content; fids are never
reused, so postings of an old version can stay in place, masked by the ``dead`` list, until compaction.

    meta    b"schema" -> SCHEMA      b"stats" -> Stats        b"ready" -> (True, finished_at)
            b"dead" -> uint32 fids whose postings are stale (append-only between full compactions)
            b"compact" -> an unfinished compaction (see compact.py)
    files   path -> FileRecord                    paths   fid -> path (live versions only)
    defs    fid + idx(4) -> DefRecord             names   name -> fid + idx (dupsort, dupfixed)
    imports fid -> [(flavor, spec, names, line, wildcard)]
    text    fid -> file bytes as indexed (the identifiers a file uses are derived from it on demand)
    blocks  fid -> [(start_line, end_line, start_byte, end_byte)]
    post    bucket(2) + segment(4) -> postings of the terms in that hash bucket (see postings.py)
    segs    segment(4) -> (files, entries)
    skipped path -> (size, mtime_ns, reason)   binary/unreadable files, so a re-run need not reopen them
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
    "loads",
    "seg_bytes",
]

SCHEMA = f"fimble-index/3 marshal{marshal.version} {sys.byteorder}".encode()
DB_NAMES = (
    "meta", "files", "paths", "defs", "names", "imports", "text", "blocks", "post", "segs",
    "skipped", "base", "mods",
)  # fmt: skip
DUPSORT = {"names": {"dupsort": True, "dupfixed": True}, "base": {"dupsort": True}}
MAX_KEY = 500  # LMDB's compiled-in limit is 511 bytes, for keys and dupsort values alike

_U32 = struct.Struct(">I")
_DEF = struct.Struct(">II")

dumps = marshal.dumps
loads = marshal.loads


def fid_bytes(fid: int) -> bytes:
    return _U32.pack(fid)


seg_bytes = fid_bytes


def def_key(fid: int, idx: int) -> bytes:
    return _DEF.pack(fid, idx)


class FileRecord(NamedTuple):
    fid: int
    seg: int  # segment holding this version's postings (0: none)
    size: int
    mtime_ns: int
    digest: bytes
    language: str
    n_lines: int
    n_defs: int
    n_blocks: int
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
    next_seg: int = 1
    blocks: int = 0
    total_length: int = 0
    definitions: int = 0
    generation: int = 0
    languages: tuple[tuple[str, int], ...] = ()

    def pack(self) -> bytes:
        return dumps(tuple(self))

    @classmethod
    def unpack(cls, raw: bytes | None) -> Stats:
        return cls(*loads(raw)) if raw else cls()
