"""Values the index hands to the completion pipeline: frozen, slotted, plain data.

Paths are workspace-relative with ``/`` separators (what a prompt shows as a file header); join them
to ``WorkspaceIndex.root`` for an absolute path. Lines are 0-based like LSP; columns count UTF-8 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Definition", "Import", "IndexStats", "PassReport", "Progress", "Snippet", "Span", "SymbolsNear"]


@dataclass(frozen=True, slots=True)
class Span:
    """A source range; ``end_line`` is inclusive."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    def contains_line(self, line: int) -> bool:
        return self.start_line <= line <= self.end_line


@dataclass(frozen=True, slots=True)
class Definition:
    """A function, method, class/struct/interface/trait/enum, type alias, constant or macro.

    ``signature`` is the header only (decorators and ``export`` included, body excluded, at most a few
    lines); ``doc`` is the first line of its docstring or of the comment right above it, or ``""``.
    ``scope`` is the qualified name of the enclosing definition (``""`` at top level) and ``qualname``
    joins scope and name with the language's separator (``.``, or ``::`` for C++ and Rust).
    """

    path: str
    language: str
    kind: str
    name: str
    qualname: str
    scope: str
    span: Span
    signature: str
    doc: str


@dataclass(frozen=True, slots=True)
class Import:
    """One import of ``path``: ``spec`` as written, the ``names`` it binds, and the workspace files it
    resolves to (``targets``, most specific first; empty for external or unresolvable imports)."""

    path: str
    line: int
    spec: str
    names: tuple[str, ...]
    targets: tuple[str, ...]

    @property
    def target(self) -> str | None:
        return self.targets[0] if self.targets else None


@dataclass(frozen=True, slots=True)
class SymbolsNear:
    """What code at one line sits in and refers to.

    ``enclosing``: the definitions whose span contains the line, outermost first. ``referenced``:
    definitions of identifiers used within a few lines of it, found anywhere in the workspace, best
    first: those in files the current file imports, then in the file itself, then unambiguous ones
    elsewhere; the enclosing definitions are not repeated.
    """

    path: str
    line: int
    enclosing: tuple[Definition, ...]
    referenced: tuple[Definition, ...]


@dataclass(frozen=True, slots=True)
class Snippet:
    """A text window found by lexical search; ``end_line`` is inclusive."""

    path: str
    language: str
    start_line: int
    end_line: int
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What the index holds. ``ready`` is False until the first full pass has been committed."""

    root: str
    store_path: str
    ready: bool
    files: int
    parsed_files: int
    definitions: int
    blocks: int
    segments: int
    stale_versions: int
    store_bytes: int
    map_bytes: int
    languages: tuple[tuple[str, int], ...]
    last_pass_at: float | None
    pending_updates: int
    paused: bool


@dataclass(frozen=True, slots=True)
class Progress:
    """Reported during a pass: files and bytes analysed so far out of those that needed it."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int


@dataclass(frozen=True, slots=True)
class PassReport:
    """The outcome of one full pass over the workspace."""

    scanned: int
    parsed: int
    unchanged: int
    touched: int
    removed: int
    skipped: int
    bytes_parsed: int
    seconds: float
    ignored: int
    secrets: int
    too_large: int
    loops: int
    symlinks_outside: int
