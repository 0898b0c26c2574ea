"""Find the files to index under a workspace root.

Symlinks are followed only while they stay inside the workspace (a link out of it could pull in
``~/.ssh``); every directory is entered once, keyed by (device, inode), which both breaks symlink loops
and stops a file reachable through two paths from being indexed twice. Entries are visited in sorted
order so the result is deterministic. Content checks (binary, encoding) happen later, when a file is
read; here only names and ``stat`` are used, which keeps a no-change re-run cheap.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fimble.indexer.ignore import IgnoreRules

__all__ = ["FileEntry", "WalkStats", "walk"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file the indexer may read: POSIX path relative to the root, absolute path, stat facts."""

    rel: str
    path: str
    size: int
    mtime_ns: int


@dataclass(slots=True)
class WalkStats:
    """What the walk left out, for ``stats()`` and the CLI summary."""

    files: int = 0
    ignored: int = 0
    secrets: int = 0
    too_large: int = 0
    symlinks_outside: int = 0
    loops: int = 0
    unreadable: list[str] = field(default_factory=list)


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real + os.sep)


def walk(
    root: Path, rules: IgnoreRules, *, max_bytes: int, stats: WalkStats | None = None
) -> Iterator[FileEntry]:
    """Yield every indexable file under ``root`` (which must be a readable directory)."""
    stats = stats if stats is not None else WalkStats()
    root_real = os.path.realpath(root)
    root_stat = os.stat(root_real)
    seen_dirs: set[tuple[int, int]] = {(root_stat.st_dev, root_stat.st_ino)}
    seen_files: set[tuple[int, int]] = set()
    stack: list[tuple[str, str]] = [("", str(root))]
    while stack:
        rel_dir, abs_dir = stack.pop()
        try:
            with os.scandir(abs_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            log.info("cannot list %s: %s", abs_dir, err)
            stats.unreadable.append(rel_dir or ".")
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_link = entry.is_symlink()
                st = entry.stat(follow_symlinks=True)
            except OSError:
                continue  # dangling link or vanished
            if is_link and not _inside(os.path.realpath(entry.path), root_real):
                stats.symlinks_outside += 1
                continue
            if stat.S_ISDIR(st.st_mode):
                if rules.skip_dir(rel, entry.path):
                    stats.ignored += 1
                    continue
                key = (st.st_dev, st.st_ino)
                if st.st_ino and key in seen_dirs:
                    stats.loops += 1
                    continue
                seen_dirs.add(key)
                subdirs.append((rel, entry.path))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if rules.skip_file(rel):
                if rules.is_secret(rel):
                    stats.secrets += 1
                else:
                    stats.ignored += 1
                continue
            if st.st_size > max_bytes:
                stats.too_large += 1
                continue
            key = (st.st_dev, st.st_ino)
            if st.st_ino and key in seen_files:
                continue
            seen_files.add(key)
            stats.files += 1
            yield FileEntry(rel, entry.path, st.st_size, st.st_mtime_ns)
        stack.extend(reversed(subdirs))
