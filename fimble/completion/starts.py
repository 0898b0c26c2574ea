"""Per file, the line its last small first prompt began at, kept beside the KV states on disk.

The warmer starts a file's next small prompt at that line, so the saved head of the last one is read
back instead of evaluated (``Warmer._small_prompt``). Kept in memory only, the hint died with the
server: continuing on the next line after a restart evaluated the whole small prompt again although
its head was on disk. It is only a hint: a prompt starting there is used only when it costs less
than the usual one, so a stale line (the file edited, the state evicted) costs nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path

__all__ = ["FILE_NAME", "StartLines"]

log = logging.getLogger(__name__)

FILE_NAME = "small-starts.json"  # in the KV state directory; ``KVStore`` only looks at ``*.kv``


class StartLines:
    """A bounded map of file -> line (least recently set forgotten first), saved to ``root``.

    Used from the engine's thread only; two servers sharing a directory overwrite each other's
    file, which loses hints, never states."""

    def __init__(self, limit: int = 256) -> None:
        self._lines: dict[str, int] = {}
        self._limit = limit
        self._root: Path | None = None

    def attach(self, root: Path | None) -> None:
        """Read the hints saved in ``root`` (once per directory); None keeps them in memory only.
        The ones set in this process since win over those read back."""
        if root == self._root:
            return
        self._root = root
        if root is None:
            return
        try:
            data = json.loads((root / FILE_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # none yet, or a torn write: hints only
        if not isinstance(data, dict):
            return
        loaded = {k: v for k, v in data.items() if isinstance(k, str) and type(v) is int and v >= 0}
        self._lines = {**{k: v for k, v in loaded.items() if k not in self._lines}, **self._lines}
        self._trim()

    def get(self, key: str) -> int | None:
        return self._lines.get(key)

    def put(self, key: str, line: int) -> None:
        if self._lines.get(key) == line:
            return
        self._lines.pop(key, None)  # re-inserted last: the oldest file is forgotten first
        self._lines[key] = line
        self._trim()
        if self._root is not None:
            self._write(self._root)

    def _trim(self) -> None:
        while len(self._lines) > self._limit:
            del self._lines[next(iter(self._lines))]

    def _write(self, root: Path) -> None:
        path = root / FILE_NAME
        tmp = root / f"{FILE_NAME}.tmp.{os.getpid()}.{threading.get_ident()}"
        try:
            tmp.write_text(json.dumps(self._lines), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as err:  # a full disk loses a hint, nothing else
            log.debug("could not save small prompt start lines to %s (%s)", path, err)
            with contextlib.suppress(OSError):
                tmp.unlink()
