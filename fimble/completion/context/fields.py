"""A class's data attributes, read from its source: what ``obj.`` and ``Cls(`` are followed by.

The index keeps a class's methods (signatures) but not its fields: a dataclass's annotated
attributes, class-level constants, and what ``__init__`` assigns to ``self``. For the many classes
that are mostly data (dataclasses, pydantic models, span data, settings), those *are* the API:
``WebSearchTool(search_context_size=...)``, ``span_data.input_format = ...``. This module finds them
in the class's own lines (its span, as the index recorded it), skipping method bodies, so a
skeleton can show them under the class header. Pure functions over lines; ``SourceLines`` reads
(and caches) the workspace file a class lives in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["SourceLines", "class_fields", "init_attributes"]

_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(:[^=]+)?(=.*)?$")
_SELF_ATTR = re.compile(r"^self\.([A-Za-z_][A-Za-z0-9_]*)\s*(:[^=]+)?=(?!=)")
_MAX_FILE = 1 << 20  # the index skips larger files too


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _short(text: str, limit: int) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else text[: limit - 4].rstrip() + " ..."


def class_fields(lines: Sequence[str], start: int, end: int, limit: int = 8, width: int = 90) -> list[str]:
    """Class-level attributes of the class whose header is at 0-based ``start`` (``end`` inclusive):
    ``name: T = v`` and ``name = v`` lines at the body's indentation, stripped, in source order,
    each cut to ``width``. Method bodies, nested classes, decorators, docstrings and private names
    (``_x``) are skipped; a value that continues on later lines is shown as its first line."""
    out: list[str] = []
    body: int | None = None
    for row in range(start + 1, min(end + 1, len(lines))):
        line = lines[row]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        depth = _indent(line)
        if body is None:
            body = depth
        if depth != body:
            continue
        text = line.strip()
        m = _FIELD.match(text)
        if not m or text.startswith(("_", "def ", "class ", "async ", "@", "return")):
            continue
        if not (m.group(2) or m.group(3)) or m.group(1) in ("pass",):
            continue
        out.append(_short(text, width))
        if len(out) >= limit:
            break
    return out


def init_attributes(lines: Sequence[str], start: int, end: int, limit: int = 6, width: int = 80) -> list[str]:
    """``self.x = ...`` / ``self.x: T = ...`` assignments in the body of ``__init__`` spanning
    ``start``..``end`` (0-based, inclusive): the instance attributes, first assignment of each public
    name, stripped and cut to ``width``."""
    out: list[str] = []
    seen: set[str] = set()
    for row in range(start + 1, min(end + 1, len(lines))):
        text = lines[row].strip()
        m = _SELF_ATTR.match(text)
        if not m or m.group(1).startswith("_") or m.group(1) in seen:
            continue
        seen.add(m.group(1))
        out.append(_short(text, width))
        if len(out) >= limit:
            break
    return out


class SourceLines:
    """Lines of workspace files by relative path, read from disk once per modification time.

    A file that cannot be read, or is too large, gives no lines (less context, never an error)."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self.root = Path(root) if root is not None else None
        self._cache: dict[str, tuple[float, list[str]]] = {}

    def __call__(self, path: str) -> list[str]:
        if self.root is None:
            return []
        full = self.root / path
        try:
            stat = full.stat()
            if stat.st_size > _MAX_FILE:
                return []
            hit = self._cache.get(path)
            if hit is not None and hit[0] == stat.st_mtime:
                return hit[1]
            lines = full.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
        if len(self._cache) > 256:
            self._cache.clear()
        self._cache[path] = (stat.st_mtime, lines)
        return lines

    @classmethod
    def of(cls, index: Any) -> SourceLines:
        """For an index that knows its workspace root (``WorkspaceIndex.root``); none otherwise."""
        return cls(getattr(index, "root", None))
