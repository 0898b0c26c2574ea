"""Repository context for the one-shot commands (`complete`, `explain`): read the existing index of
the file's workspace, never build one (that is `fimble index`'s job and can take a while)."""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["ContextFiles", "workspace_context", "workspace_root"]

log = logging.getLogger(__name__)

ContextFiles = tuple[tuple[str, str, str], ...]
_MARKERS = (".git", "pyproject.toml", "package.json", "go.mod", "Cargo.toml", "setup.py")


def workspace_root(path: Path) -> Path:
    """The nearest folder above ``path`` that looks like a project root, else the file's folder."""
    start = path.resolve().parent
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in _MARKERS):
            return folder
    return start


def workspace_context(path: Path, text: str, offset: int) -> tuple[ContextFiles, str, str | None]:
    """(context files, the path the prompt shows, a note for the user when there is no context)."""
    from fimble.completion.context.gather import gather_context
    from fimble.errors import FimbleError, IndexNotReady
    from fimble.indexer import WorkspaceIndex

    root = workspace_root(path)
    rel = path.resolve().relative_to(root).as_posix()
    try:
        index = WorkspaceIndex.open(root, writable=False)
    except IndexNotReady:
        return (), rel, f"no index of {root} yet: run `fimble index {root}` for repository context"
    except FimbleError as err:
        return (), rel, f"no repository context: {err}"
    with index:
        chunks = gather_context(index, rel, text, text.count("\n", 0, offset))
    return tuple(c.as_tuple() for c in chunks), rel, None
