"""Recently edited and visited regions: what the user was just working on, as context for elsewhere.

The index knows files as they were saved; the editor's last edits (often in the file a new call's
definition lives in) and the places the user just completed in are fresher and more relevant. The
server tells this tracker about every ``didChange`` (the edited line) and every completion (the
visited line); ``ContextGatherer`` asks it for chunks when the cursor enters a new region.

Recording is O(1) and runs on the event loop for every keystroke: a region keeps a reference to the
document's (immutable) text and a line number; lines are cut out only when chunks are asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from fimble.completion.context.gather import ContextChunk

__all__ = ["RecentRegions"]


@dataclass
class _Region:
    path: str
    line: int
    text: str
    edited: bool


class RecentRegions:
    """The last ``limit`` regions edited or visited, newest last; nearby activity merges into one."""

    def __init__(self, *, limit: int = 6, radius: int = 6, merge_lines: int = 12) -> None:
        self.limit = limit
        self.radius = radius
        self.merge_lines = merge_lines
        self._regions: list[_Region] = []
        self._lock = threading.Lock()

    def edited(self, path: str, text: str, line: int) -> None:
        self._note(path, text, line, edited=True)

    def visited(self, path: str, text: str, line: int) -> None:
        self._note(path, text, line, edited=False)

    def _note(self, path: str, text: str, line: int, *, edited: bool) -> None:
        with self._lock:
            for i, r in enumerate(self._regions):
                if r.path == path and abs(r.line - line) <= self.merge_lines:
                    del self._regions[i]
                    edited = edited or r.edited
                    break
            self._regions.append(_Region(path, line, text, edited))
            del self._regions[: -self.limit]

    def forget(self, path: str) -> None:
        with self._lock:
            self._regions = [r for r in self._regions if r.path != path]

    def chunks(
        self, exclude: str | None = None, shown: Callable[[str], str | None] = lambda p: p
    ) -> list[ContextChunk]:
        """Regions outside ``exclude``, newest first, as context chunks; ``shown`` maps a path to the
        one the prompt shows (workspace-relative), or None to leave the region out."""
        with self._lock:
            regions = list(reversed(self._regions))
        out: list[ContextChunk] = []
        for r in regions:
            path = shown(r.path)
            if path is None or path == exclude or r.path == exclude:
                continue
            lines = r.text.split("\n")
            lo = max(0, r.line - self.radius)
            body = "\n".join(lines[lo : r.line + self.radius + 1]).strip("\n")
            if body.strip():
                what = "edited" if r.edited else "visited"
                where = f"lines {lo + 1}-{min(len(lines), r.line + self.radius + 1)}"
                out.append(ContextChunk(path, body, f"recently {what} ({where})"))
        return out
