"""Repository context for a cursor: which snippets of other files the model should see, and why.

Pure selection over what the index answers (signatures, outlines, BM25 windows) and what the editor
knows (recently edited regions). Order matters as much as choice: the chunks go first in the prompt,
so a chunk that changes invalidates the model's cache for everything after it. The gatherer is
therefore *sticky*: it recomputes only when the cursor leaves the region the context was made for,
and it orders chunks from most stable (outlines of imported modules) to least (lexical neighbours).

Over 400 lines on purpose: the sticky region, the ordering and the budget split are one decision and
read best together; the renderers it calls live in the modules beside it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fimble.completion.context import js_imports
from fimble.completion.context.fields import SourceLines
from fimble.completion.context.imports import IMPORT_CHOICES, import_choices, open_list
from fimble.completion.context.js_imports import is_js
from fimble.completion.context.outlines import (
    TEST_FILE,
    definition_chunk,
    outlines,
    reachable,
    reexports,
    render_outline,
)
from fimble.completion.context.similar import aligned_spot, window_around
from fimble.completion.context.skeletons import (
    DefinitionLike,
    Source,
    class_skeleton,
    guess_receivers,
    members_by_class,
    returned_classes,
)
from fimble.completion.context.unbound import (
    PYTHON_BUILTINS,
    bound_names,
    code_only,
    import_rows,
    imported_names,
    starts_import,
    unbound_definitions,
    unbound_names,
)

__all__ = ["ContextChunk", "ContextGatherer", "IndexReader", "gather_context"]

log = logging.getLogger(__name__)


class _Span(Protocol):
    start_line: int
    end_line: int


class _Definition(DefinitionLike, Protocol):
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
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTRIBUTE = re.compile(r"\.\s*([A-Za-z_][A-Za-z0-9_]*)")


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


def _same_language(path: str) -> Callable[[str], bool]:
    """Whether another file is code of the cursor's language (its family: languages sharing a
    tree-sitter query file, JavaScript and TypeScript, C and C++). A BM25 neighbour of Python code in
    a docs page, a changelog or a pinned requirements list shares the cursor's words, not its code:
    on flask such windows (``docs/*.rst``) were in 3 of 8 lines context lost and 1 of 14 it won. A
    cursor in a file no grammar covers takes neighbours from any file."""
    from fimble.indexer.languages import detect_language, language_spec

    spec = language_spec(detect_language(path))
    if spec is None:
        return lambda other: True
    mine = set(spec.queries)

    def same(other: str) -> bool:
        theirs = language_spec(detect_language(other))
        return theirs is not None and not mine.isdisjoint(theirs.queries)

    return same


def _code_names(path: str, text: str, line: int, radius: int = 12) -> set[str] | None:
    """Names written in the *code* within ``radius`` lines of the cursor (the index's own window for
    "used near the cursor"), or None when the file is not Python (whose strings and comments
    ``code_only`` knows). The index finds definitions for every word near the cursor, prose included:
    "Iterates over all blueprints" in a docstring showed flask's ``Request.blueprints`` property
    above ``App.iter_blueprints``, and the model wrote ``iter(self.blueprints)``. On the flask and
    openai-agents evals such chunks were in 3 lines context lost and in none it won. A builtin
    called by its bare name (``super().__init__()``, ``type(x)``) is Python's, not the workspace's
    method of that name: it counts only as an attribute (``ctx.super()``); jinja2's two
    ``Context.super`` chunks were in the prompt of an import line that context lost."""
    from fimble.indexer.languages import detect_language

    if detect_language(path) != "python":
        return None
    rows = code_only(text).split("\n")
    window = "\n".join(rows[max(0, line - radius) : line + radius + 1])
    attributes = set(_ATTRIBUTE.findall(window))
    return {n for n in _NAME.findall(window) if n not in PYTHON_BUILTINS or n in attributes}


def _in_buffer(imports: Sequence[Any], rows: Sequence[str], js: bool) -> list[Any]:
    """The index's imports of the file that its buffer still writes, with the names it still lists.

    The index holds the file as last read from disk; the buffer is newer. An import the user deleted
    or is rewriting must not count as binding its names (the import guide would then offer nothing
    for them) nor have its module shown as imported: in the served eval, where the masked file reaches
    the index through the watcher, the stale import named exactly the masked line's module and names.
    """
    text = "\n".join(rows)
    out: list[Any] = []
    for imp in imports:
        spec = getattr(imp, "spec", "") or ""
        if not spec:  # nothing to look for: kept as the index says
            out.append(imp)
            continue
        if js:
            present = f"'{spec}'" in text or f'"{spec}"' in text
        else:
            present = re.search(rf"\b(?:from|import)\s+{re.escape(spec)}(?![\w.])", text) is not None
        if not present:
            continue
        names = tuple(n for n in imp.names if re.search(rf"(?<![\w$]){re.escape(n)}(?![\w$])", text))
        if imp.names and not names:
            continue
        trimmed = names != tuple(imp.names) and dataclasses.is_dataclass(imp)
        out.append(dataclasses.replace(imp, names=names) if trimmed else imp)
    return out


def _in_import_block(imports: Sequence[_Import], line: int, text_rows: Iterable[int] = ()) -> bool:
    """The cursor sits among the file's imports (within two lines of one): it is probably writing
    one, so whole module outlines (not only the names already imported) are what helps. An import
    inside a function further down makes only its own lines an import block, not the whole file
    between it and the top. ``text_rows`` are import rows read from the buffer, which a file just
    opened has before the index does."""
    rows = [row for imp in imports if (row := getattr(imp, "line", None)) is not None]
    return any(row - 2 <= line <= row + 2 for row in [*rows, *text_rows])


# Base scores by source; a mention of a name written near the cursor adds _MENTION each, so the chunks
# that explain what the cursor's surroundings use come first and survive the token budget.
_IMPORTED, _DEFINES, _RECENT, _MENTION = 2.0, 1.5, 1.0, 3.0
# A lexical neighbour cut to the spot that reads like the cursor's lines (``similar.py``) goes first:
# what follows code written like the cursor's is what the next line most often is, and at ~100
# tokens it leaves room for the rest. Whole windows ranked below everything, the full prompt matched
# 66 of 130 lines; with these first, 70 (``bench/results/similar_aligned.json``).
_SIMILAR = 20.0
# A neighbour with no such spot is shown whole, as all were before, ranked by the names it mentions;
# a window of 20-odd lines mentions them almost by construction, so each counts for less.
_UNALIGNED, _MENTION_SIMILAR = 0.0, 1.5
# A class whose methods the cursor's own line calls on a receiver (``app.|``): what the line needs.
_RECEIVER, _ON_CURSOR_LINE = 3.0, 6.0
# Module-level assignments: found by name alone in a file the cursor's imports do not reach, they are
# a coincidence of names (openai-agents: ``result`` of an example script, shown in 28 of 80 lines).
_VARIABLES = frozenset({"variable", "constant"})
# Among the imports, the definition of a name the file uses but does not import yet: precisely what
# the import being written is for, so it outranks whole-module outlines that mention many names.
_UNBOUND = 12.0
# A barrel's modules not re-exported yet are shown when there are at most this many.
_BARREL_SHOWN = 4


def gather_context(
    index: IndexReader,
    path: str,
    text: str,
    line: int,
    *,
    recent: Sequence[ContextChunk] = (),
    max_chunks: int = 12,
    window_lines: int = 60,
    source: Source | None = None,
) -> list[ContextChunk]:
    """Choose and order context chunks for a cursor at 0-based ``line`` of ``path``, best first.

    Sources: outlines of imported workspace modules (restricted to the names imported, unless the
    cursor is among the imports; classes as skeletons; a package's re-exports followed to the
    definitions of the names this file uses), definitions of symbols used near the cursor (a class
    as its skeleton, a method under its class; not other tests' helpers that share a name, nor
    module variables of files the imports do not reach), the class a receiver near the cursor looks
    like (``app.route``, ``app.test_client`` -> its skeleton), recently edited or visited regions,
    and BM25 neighbours of the lines above the cursor in files of the cursor's language. Each is
    scored by its source and by how many names written around the cursor it mentions; the best
    come first, so ``build_prompt``'s token budget keeps them. Chunks already visible around the
    cursor or nearly repeating it or each other are dropped. Index failures mean less context,
    never no completion. Among a Python, JavaScript or TypeScript file's imports, one more chunk
    comes last: the import statements the file lacks (``IMPORT_CHOICES``), which guide decoding
    instead of being shown.
    """
    lines = text.splitlines()
    lo, hi = max(0, line - window_lines), min(len(lines), line + window_lines)
    visible = "\n".join(lines[lo:hi])
    near = _near_names(lines, line)
    js = is_js(path)
    rows_of, names_of, unbound_of = (
        (js_imports.import_rows, js_imports.imported_names, js_imports.unbound_names)
        if js
        else (import_rows, imported_names, unbound_names)
    )
    in_imports = rows_of(lines)
    body = "\n".join(ln for row, ln in enumerate(lines) if row not in in_imports)
    used = set(_WORD.findall(body))
    source = source or SourceLines.of(index)
    scored: list[tuple[float, int, ContextChunk]] = []
    seen_paths_defs: set[tuple[str, str]] = set()
    imports: Sequence[_Import] = ()
    unbound: list[str] = []
    whole = False

    def offer(chunk: ContextChunk, base: float, mention: float = _MENTION) -> None:
        if chunk.path == path or not chunk.text.strip():
            return
        scored.append((base + mention * _mentions(chunk.text, near), len(scored), chunk))

    try:
        imports = _in_buffer(index.imports_of(path), [lines[r] for r in sorted(in_imports)], js)
        whole = _in_import_block(imports, line, in_imports)
        # Imported but not used yet: the line being written is about to use it (``HandoffOutputItem``
        # imported, its one use being typed), so its definition goes first. Among the imports, so
        # do the names the file uses but imports from nowhere: what the import being written is for.
        pending = {n for imp in imports if imp.targets for n in imp.names} - used
        writing: set[int] = set()
        if js:  # the import being written binds nothing yet, neither as the buffer nor as the index has it
            exists = lambda spec: js_imports.module_exists(index, path, spec)  # noqa: E731
            writing = js_imports.being_written(lines, in_imports, line, exists)
        done = [imp for imp in imports if getattr(imp, "line", None) not in writing]
        bound = bound_names(index, path, done) | names_of(lines, in_imports - writing)
        unbound = unbound_of(body, bound, limit=40) if whole else []
        pending |= set(unbound)
        for imp in imports:
            if not imp.targets:
                continue
            target = imp.targets[0]
            if (target, "*") in seen_paths_defs:
                continue
            names = None if whole else set(imp.names)
            defs = index.file_outline(target)
            own = render_outline(defs, names, brief=whole, wanted=near, source=source, first=pending)
            more = reexports(index, target, names, used, near, source=source, first=pending)
            outline = "\n".join(part for part in (own, more) if part)
            if outline:
                shown = ", ".join(imp.names[:4]) if imp.names else target
                reason = f"imported: {shown}" + (" (whole module: cursor among the imports)" if whole else "")
                offer(ContextChunk(target, outline, reason), _IMPORTED)
                seen_paths_defs.add((target, "*"))
    except Exception:  # index trouble: fewer chunks, never no completion
        log.debug("imports_of(%s) failed", path, exc_info=True)
    for d, name, text_of in unbound_definitions(index, path, unbound, seen_paths_defs, source):
        offer(ContextChunk(d.path, text_of, f"defines {name}, used in this file but not imported"), _UNBOUND)
    try:
        reach = reachable(index, path, imports)
    except Exception:
        reach = []
    known = outlines(index, reach)
    classes = {(d.path, d.qualname): d for defs in known.values() for d in defs if d.kind == "class"}
    members: dict[tuple[str, str], list] = {}
    for p, defs in known.items():
        for scope, ms in members_by_class(defs).items():
            members[(p, scope)] = ms
    in_code = _code_names(path, text, line)
    try:
        for d in index.symbols_near(path, line).referenced:
            if (d.path, "*") in seen_paths_defs or (d.path, d.qualname) in seen_paths_defs:
                continue
            if d.path not in known and TEST_FILE.search(d.path):
                continue  # another test's ``foo``: same name, nothing to do with this line
            if d.path not in known and d.kind in _VARIABLES:
                continue  # ``result = ...`` in an example script nothing here imports: another ``result``
            if in_code is not None and d.name not in in_code:
                continue  # a word of a docstring or comment near the cursor, not a name its code uses
            seen_paths_defs.add((d.path, d.qualname))
            shown = definition_chunk(d, classes, members, source)
            offer(ContextChunk(d.path, shown, f"defines {d.name}, used near the cursor"), _DEFINES)
    except Exception:
        log.debug("symbols_near(%s, %d) failed", path, line, exc_info=True)
    try:
        around = "\n".join(lines[max(0, line - 30) : line + 1])
        cursor_line = lines[line] if line < len(lines) else ""
        by_qual = {qual: ms for (_, qual), ms in members.items()}
        modules = {n for imp in imports for n in (getattr(imp, "spec", "") or "").split(".")[:1]}
        for recv, qual, hits in guess_receivers(around, by_qual, skip=modules)[:2]:
            owner = next(((p, q) for (p, q) in members if q == qual), None)
            cls = classes.get(owner) if owner else None
            if owner is None or cls is None or (owner[0], qual) in seen_paths_defs:
                continue
            seen_paths_defs.add((owner[0], qual))
            on_recv = {a for r, a in re.findall(r"\b(\w+)\.(\w+)", around) if r == recv}
            shown = class_skeleton(cls, members[owner], on_recv, limit_chars=900, source=source)
            bonus = _ON_CURSOR_LINE if re.search(rf"\b{re.escape(recv)}\.", cursor_line) else 0.0
            reason = f"{recv} looks like a {qual} (uses {hits} of its methods)"
            offer(ContextChunk(owner[0], shown, reason), _RECEIVER + bonus)
        callables: dict[str, list] = {}
        for defs in known.values():
            for d in defs:
                callables.setdefault(d.name, []).append(d)
        names = {q for (_, q) in classes}
        above = "\n".join(lines[max(0, line - 15) : line])
        for var, qual, callee in returned_classes(above, callables, names)[:2]:
            owner = next(((p, q) for (p, q) in classes if q == qual), None)
            if owner is None or owner in seen_paths_defs:
                continue
            seen_paths_defs.add(owner)
            on_recv = {a for r, a in re.findall(r"\b(\w+)\.(\w+)", around) if r == var}
            shown = class_skeleton(classes[owner], members.get(owner, []), on_recv, 900, source)
            bonus = _ON_CURSOR_LINE if re.search(rf"\b{re.escape(var)}\.", cursor_line) else 0.0
            reason = f"{var} is {'an' if qual[0] in 'AEIOU' else 'a'} {qual} (from {callee})"
            offer(ContextChunk(owner[0], shown, reason), _RECEIVER + bonus)
    except Exception:
        log.debug("receiver guess near %s:%d failed", path, line, exc_info=True)
    for chunk in recent:
        offer(ContextChunk(chunk.path, chunk.text, chunk.reason or "recently edited"), _RECENT)
    spots: list[str] = []  # the similar windows' lines at the spot like the cursor's
    try:
        query = "\n".join(lines[max(0, line - 12) : line + 1])
        if _WORD.search(query):
            code = _same_language(path)
            for snip in index.search(query, k=4, exclude=(path, (lo, hi))):
                if not code(snip.path):
                    continue
                other = source(snip.path)
                start, end = snip.start_line, snip.end_line
                if not other:  # not readable here: line up within the window the index gave
                    other, start, end = snip.text.splitlines(), 0, snip.end_line - snip.start_line
                row = aligned_spot(other, start, end, lines, line)
                reason = f"similar code (bm25 {snip.score:.1f})"
                if row is not None:
                    spots.append(other[row])
                    offer(ContextChunk(snip.path, window_around(other, row), reason), _SIMILAR, 0.0)
                else:  # nothing lines up (a file shorter than the lines compared): whole, and last
                    offer(ContextChunk(snip.path, snip.text, reason), _UNALIGNED, _MENTION_SIMILAR)
    except Exception:
        log.debug("search near %s:%d failed", path, line, exc_info=True)
    barrel: dict[str, tuple[str, tuple[str, ...]]] = {}
    if js and whole and not unbound:
        try:
            # Another barrel written alike may place a row out of sorted order (rxjs's ``flatMap``
            # beside ``mergeMap``): the row at its spot like the cursor's stays a candidate.
            beside = js_imports.reexported_names(spots, set(range(len(spots))))
            barrel = js_imports.reexport_candidates(index, path, lines, line, beside)
            # A few modules the barrel lacks (the sorted rows around the cursor narrow them down):
            # shown, since the model cannot write a module it has never seen, guide or not.
            few = list(barrel.values()) if len(barrel) <= _BARREL_SHOWN else []
            for target, names in few:
                shown = render_outline(index.file_outline(target), set(names), brief=True, source=source)
                offer(ContextChunk(target, shown, f"not re-exported yet: {', '.join(names)}"), _UNBOUND)
        except Exception:
            log.debug("re-export candidates for %s failed", path, exc_info=True)
    chunks: list[ContextChunk] = []
    for _, _, chunk in sorted(scored, key=lambda s: (-s[0], s[1])):
        if _near_duplicate(chunk.text, visible):
            continue
        if _near_duplicate(chunk.text, "\n".join(c.text for c in chunks)):  # says what is already there
            continue
        chunks.append(chunk)
    chunks = chunks[:max_chunks]
    # Not shown to the model: the choices guide the import line (``fimble.completion.engine.guide``).
    # Names the file uses unbound want an import; a barrel file's rows, the next re-export.
    try:
        if unbound:
            if js:
                choices = js_imports.import_choices(index, path, lines, unbound, line)
            else:
                choices = import_choices(index, path, unbound, imports, _listing(lines, line))
        elif barrel:
            choices = js_imports.barrel_choices(barrel, lines, index, path, line)
        else:
            choices = None
    except Exception:
        log.debug("import choices for %s failed", path, exc_info=True)
    else:
        if choices:
            chunks.append(ContextChunk(path, choices.as_text(), IMPORT_CHOICES))
    return chunks


def _listing(lines: Sequence[str], line: int) -> str | None:
    """The module of the ``from M import (`` list the cursor's line is in, if any."""
    return open_list("\n".join(lines[max(0, line - 200) : line]) + "\n")


@dataclass
class _Cached:
    path: str
    line: int
    chunks: list[ContextChunk] = field(default_factory=list)
    listing: str | None = None  # (the import choices depend on it: a new list is a new region)
    importing: bool = False  # the cursor's line began an import statement (``starts_import``)


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
        # One reader for every gathering: other files' lines are read again only when they change.
        self._source = SourceLines.of(index)
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def chunks(self, path: str, text: str, line: int, *, refresh: bool = False) -> list[ContextChunk]:
        if self.index is None:
            return []
        lines = text.splitlines()
        listing = _listing(lines, line)
        importing = 0 <= line < len(lines) and starts_import(lines[line].strip())
        with self._lock:
            cached = self._cache.get(path)
            near = cached is not None and abs(cached.line - line) <= self.region and not refresh
            if cached is not None and near and (cached.listing, cached.importing) == (listing, importing):
                return cached.chunks
        recent: Sequence[ContextChunk] = ()
        if self.recent is not None:
            try:
                recent = self.recent(path)
            except Exception:  # never let the tracker cost a completion its context
                log.debug("recent regions failed", exc_info=True)
        chunks = gather_context(self.index, path, text, line, recent=recent, source=self._source)
        anchor = line
        if cached is not None and near:
            # Only the import list changed, or the cursor's line became (or stopped being) an import:
            # new choices (never shown), the same prompt, so the model's cached work on it stays
            # good, and the region keeps its place.
            shown = [c for c in cached.chunks if c.reason != IMPORT_CHOICES]
            chunks = shown + [c for c in chunks if c.reason == IMPORT_CHOICES]
            anchor = cached.line
        with self._lock:
            self._cache[path] = _Cached(path, anchor, chunks, listing, importing)
        return chunks

    def forget(self, path: str | None = None) -> None:
        """Drop sticky context (a file changed on disk, or the index was rebuilt)."""
        with self._lock:
            if path is None:
                self._cache.clear()
            else:
                self._cache.pop(path, None)
