"""Repository context for a cursor: which snippets of other files the model should see, and why.

Pure selection over what the index answers (signatures, outlines, BM25 windows) and what the editor
knows (recently edited regions). Order matters as much as choice: the chunks go first in the prompt,
so a chunk that changes invalidates the model's cache for everything after it. The gatherer is
therefore *sticky*: it recomputes only when the cursor leaves the region the context was made for,
and it orders chunks from most stable (outlines of imported modules) to least (lexical neighbours).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["ContextChunk", "ContextGatherer", "IndexReader", "gather_context"]

log = logging.getLogger(__name__)


class _Span(Protocol):
    start_line: int
    end_line: int


class _Definition(Protocol):
    path: str
    name: str
    kind: str
    qualname: str
    signature: str
    doc: str
    span: _Span


class _Import(Protocol):
    targets: tuple[str, ...]
    names: tuple[str, ...]


class _SymbolsNear(Protocol):
    referenced: Sequence[_Definition]


class _Snippet(Protocol):
    path: str
    start_line: int
    end_line: int
    text: str
    score: float


class IndexReader(Protocol):
    """The part of the workspace index the completion pipeline reads (``fimble.indexer``)."""

    def file_outline(self, path: str) -> Sequence[_Definition]: ...

    def imports_of(self, path: str) -> Sequence[_Import]: ...

    def symbols_near(self, path: str, line: int) -> _SymbolsNear: ...

    def search(
        self, text: str, k: int = 8, exclude: tuple[str, tuple[int, int]] | None = None
    ) -> Sequence[_Snippet]: ...


@dataclass(frozen=True)
class ContextChunk:
    """One other-file snippet for the prompt; ``reason`` is shown by `fimble explain`."""

    path: str
    text: str
    reason: str

    def as_tuple(self) -> tuple[str, str, str]:
        return (self.path, self.text, self.reason)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def _render_outline(
    defs: Sequence[_Definition], names: set[str] | None = None, limit: int = 40, *, brief: bool = False
) -> str:
    """Signatures (with their first doc line) of a module, optionally only the names it exports to us.

    ``brief``: top-level signatures only, without doc lines (a whole module's names, compactly).
    """
    lines: list[str] = []
    for d in defs:
        if names and d.name not in names and d.qualname.split(".")[0] not in names:
            continue
        if brief and getattr(d, "scope", ""):
            continue
        sig = d.signature.rstrip()
        if d.doc and not brief:
            indent = " " * (len(sig.splitlines()[-1]) - len(sig.splitlines()[-1].lstrip()) + 4)
            sig += f'\n{indent}"""{d.doc}"""' if d.path.endswith(".py") else f"  // {d.doc}"
        lines.append(sig)
        if len(lines) >= limit:
            break
    return "\n".join(lines)


def _near_duplicate(text: str, window: str, threshold: float = 0.5) -> bool:
    """Whether most of ``text``'s non-blank lines already appear around the cursor (the model would copy)."""
    lines = {ln.strip() for ln in text.splitlines() if ln.strip()}
    if not lines:
        return True
    seen = {ln.strip() for ln in window.splitlines() if ln.strip()}
    return len(lines & seen) / len(lines) >= threshold


def _near_names(lines: Sequence[str], line: int, above: int = 12, below: int = 4) -> set[str]:
    """Identifiers written just around the cursor: what the line being typed most likely uses."""
    return set(_WORD.findall("\n".join(lines[max(0, line - above) : line + below])))


def _mentions(text: str, names: set[str]) -> int:
    """How many of ``names`` ``text`` mentions (as whole words)."""
    return len(names & set(_WORD.findall(text))) if names else 0


def _in_import_block(imports: Sequence[_Import], line: int) -> bool:
    """The cursor sits among the file's imports: it is probably writing one, so whole module outlines
    (not only the names already imported) are what helps."""
    rows = [row for imp in imports if (row := getattr(imp, "line", None)) is not None]
    return bool(rows) and min(rows) - 1 <= line <= max(rows) + 2


def _reexports(index: IndexReader, target: str) -> str:
    """A package's ``from .x import a, b`` lines: what ``import pkg`` makes available as ``pkg.a``."""
    if not target.endswith("__init__.py"):
        return ""
    out = []
    for imp in index.imports_of(target):
        spec = getattr(imp, "spec", "")
        if imp.names and spec:
            out.append(f"from {spec} import {', '.join(imp.names)}")
    return "\n".join(out[:30])


# Base scores by source; a mention of a name written near the cursor adds _MENTION each, so the chunks
# that explain what the cursor's surroundings use come first and survive the token budget.
_IMPORTED, _DEFINES, _RECENT, _SIMILAR, _MENTION = 2.0, 1.5, 1.0, 0.0, 3.0


def gather_context(
    index: IndexReader,
    path: str,
    text: str,
    line: int,
    *,
    recent: Sequence[ContextChunk] = (),
    max_chunks: int = 12,
    window_lines: int = 60,
) -> list[ContextChunk]:
    """Choose and order context chunks for a cursor at 0-based ``line`` of ``path``, best first.

    Sources: outlines of imported workspace modules (restricted to the names imported, unless the
    cursor is among the imports; a package's outline lists what it re-exports), definitions of
    symbols used near the cursor, recently edited or visited regions, and BM25 neighbours of the
    lines above the cursor. Each is scored by its source and by how many names written around the
    cursor it mentions; the best come first, so ``build_prompt``'s token budget keeps them. Chunks
    already visible around the cursor or nearly repeating it or each other are dropped. Index
    failures mean less context, never no completion.
    """
    lines = text.splitlines()
    lo, hi = max(0, line - window_lines), min(len(lines), line + window_lines)
    visible = "\n".join(lines[lo:hi])
    near = _near_names(lines, line)
    scored: list[tuple[float, int, ContextChunk]] = []
    seen_paths_defs: set[tuple[str, str]] = set()

    def offer(chunk: ContextChunk, base: float) -> None:
        if chunk.path == path or not chunk.text.strip():
            return
        scored.append((base + _MENTION * _mentions(chunk.text, near), len(scored), chunk))

    try:
        imports = index.imports_of(path)
        whole = _in_import_block(imports, line)
        for imp in imports:
            if not imp.targets:
                continue
            target = imp.targets[0]
            if (target, "*") in seen_paths_defs:
                continue
            names = None if whole else set(imp.names)
            defs = index.file_outline(target)
            own = _render_outline(defs, names, brief=whole)
            outline = "\n".join(part for part in (own, _reexports(index, target)) if part)
            if outline:
                shown = ", ".join(imp.names[:4]) if imp.names else target
                reason = f"imported: {shown}" + (" (whole module: cursor among the imports)" if whole else "")
                offer(ContextChunk(target, outline, reason), _IMPORTED)
                seen_paths_defs.add((target, "*"))
    except Exception:  # index trouble: fewer chunks, never no completion
        log.debug("imports_of(%s) failed", path, exc_info=True)
    try:
        for d in index.symbols_near(path, line).referenced:
            if (d.path, "*") in seen_paths_defs or (d.path, d.qualname) in seen_paths_defs:
                continue
            seen_paths_defs.add((d.path, d.qualname))
            body = d.signature.rstrip() + (f"\n    # {d.doc}" if d.doc else "")
            offer(ContextChunk(d.path, body, f"defines {d.name}, used near the cursor"), _DEFINES)
    except Exception:
        log.debug("symbols_near(%s, %d) failed", path, line, exc_info=True)
    for chunk in recent:
        offer(ContextChunk(chunk.path, chunk.text, chunk.reason or "recently edited"), _RECENT)
    try:
        query = "\n".join(lines[max(0, line - 12) : line + 1])
        if _WORD.search(query):
            for snip in index.search(query, k=4, exclude=(path, (lo, hi))):
                offer(ContextChunk(snip.path, snip.text, f"similar code (bm25 {snip.score:.1f})"), _SIMILAR)
    except Exception:
        log.debug("search near %s:%d failed", path, line, exc_info=True)
    chunks: list[ContextChunk] = []
    for _, _, chunk in sorted(scored, key=lambda s: (-s[0], s[1])):
        if _near_duplicate(chunk.text, visible):
            continue
        if _near_duplicate(chunk.text, "\n".join(c.text for c in chunks)):  # says what is already there
            continue
        chunks.append(chunk)
    return chunks[:max_chunks]


@dataclass
class _Cached:
    path: str
    line: int
    chunks: list[ContextChunk] = field(default_factory=list)


class ContextGatherer:
    """Sticky context per document: recomputed when the cursor moves more than ``region`` lines away
    from where it was made, or when asked to refresh; otherwise the same chunks, token for token, so
    the model's KV cache for them survives typing."""

    def __init__(
        self,
        index: IndexReader | None,
        *,
        region: int = 20,
        recent: Callable[[str], Sequence[ContextChunk]] | None = None,
    ) -> None:
        self.index = index
        self.region = region
        self.recent = recent  # path -> recently edited/visited regions elsewhere (``RecentRegions``)
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def chunks(self, path: str, text: str, line: int, *, refresh: bool = False) -> list[ContextChunk]:
        if self.index is None:
            return []
        with self._lock:
            cached = self._cache.get(path)
            if cached is not None and not refresh and abs(cached.line - line) <= self.region:
                return cached.chunks
        recent: Sequence[ContextChunk] = ()
        if self.recent is not None:
            try:
                recent = self.recent(path)
            except Exception:  # never let the tracker cost a completion its context
                log.debug("recent regions failed", exc_info=True)
        chunks = gather_context(self.index, path, text, line, recent=recent)
        with self._lock:
            self._cache[path] = _Cached(path, line, chunks)
        return chunks

    def forget(self, path: str | None = None) -> None:
        """Drop sticky context (a file changed on disk, or the index was rebuilt)."""
        with self._lock:
            if path is None:
                self._cache.clear()
            else:
                self._cache.pop(path, None)
