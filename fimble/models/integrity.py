"""Hashing and the ``<file>.verified`` record that spares a 1 GB rehash on every start.

A full sha256 of the default model takes seconds; the engine, ``models list`` and ``doctor`` all
want to know the file is intact. After one full check we write a small JSON record next to the
file with its size, mtime, inode, change time and hash. Later quick checks trust the record only
while all four are unchanged: a file replaced by another (a new inode, even with the same size and
a copied mtime) or rewritten in place with its mtime put back (``touch -r``, ``cp -p``, ``rsync -t``:
the change time cannot be set back) is hashed again before it is loaded, not trusted. A record
written before inode and change time were kept has neither, so it is checked once more.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "RecordEntry",
    "Verified",
    "b64_digest",
    "parse_wheel_record",
    "read_verified",
    "record_path",
    "remove_verified",
    "sha256_file",
    "write_verified",
]

_CHUNK = 4 << 20


def sha256_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """Hex sha256 of ``path``; ``on_bytes(n)`` is called per chunk for a progress bar."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            h.update(view[:n])
            if on_bytes is not None:
                on_bytes(n)
    return h.hexdigest()


def b64_digest(digest: bytes) -> str:
    """The wheel RECORD spelling of a digest: urlsafe base64 without padding (PEP 376/427)."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class RecordEntry:
    algorithm: str
    digest: str  # urlsafe base64, no padding
    size: int | None


def parse_wheel_record(text: str) -> dict[str, RecordEntry]:
    """Map member path -> its RECORD hash; rows without a hash (RECORD itself) are skipped."""
    entries: dict[str, RecordEntry] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or not row[1] or "=" not in row[1]:
            continue
        algorithm, _, digest = row[1].partition("=")
        size = int(row[2]) if len(row) > 2 and row[2].strip().isdigit() else None
        entries[row[0]] = RecordEntry(algorithm.lower(), digest.rstrip("="), size)
    return entries


@dataclass(frozen=True)
class Verified:
    """The content of ``<file>.verified``: proof of a full hash, valid while the file's size, mtime,
    inode (with its device) and change time hold."""

    size: int
    mtime_ns: int
    sha256: str
    source: str = ""
    verified_at: float = 0.0
    inode: int = 0  # 0: a record from before these were kept (never matches)
    device: int = 0
    ctime_ns: int = 0

    def matches(self, st: os.stat_result) -> bool:
        return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_ctime_ns) == (
            self.size,
            self.mtime_ns,
            self.inode,
            self.device,
            self.ctime_ns,
        )


def record_path(model_file: Path) -> Path:
    return model_file.with_name(model_file.name + ".verified")


def read_verified(model_file: Path) -> Verified | None:
    """The record, or None when missing or unreadable (an unreadable record just means rehash)."""
    try:
        data = json.loads(record_path(model_file).read_text(encoding="utf-8"))
        return Verified(
            size=int(data["size"]),
            mtime_ns=int(data["mtime_ns"]),
            sha256=str(data["sha256"]),
            source=str(data.get("source", "")),
            verified_at=float(data.get("verified_at", 0.0)),
            inode=int(data.get("inode", 0)),
            device=int(data.get("device", 0)),
            ctime_ns=int(data.get("ctime_ns", 0)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_verified(model_file: Path, sha256: str, source: str = "") -> Verified:
    """Record a successful full check of ``model_file`` (atomically, so readers never see half)."""
    st = model_file.stat()
    rec = Verified(
        st.st_size, st.st_mtime_ns, sha256, source, time.time(), st.st_ino, st.st_dev, st.st_ctime_ns
    )
    target = record_path(model_file)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(rec), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return rec


def remove_verified(model_file: Path) -> None:
    record_path(model_file).unlink(missing_ok=True)
