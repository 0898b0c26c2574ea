"""``IndexHook`` over ``fimble.indexer``: one persistent index per workspace folder.

The server's index thread calls these methods (never the event loop). Indexing runs in the indexers'
own background threads and steps aside while the model works: the engine worker calls ``enter`` and
``exit`` around every job, which hold every index's gate. Context comes from
``fimble.completion.context.gather`` (sticky per cursor region, so the prompt's first chunks stay
token-identical while the user types).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fimble.completion.context.gather import ContextChunk, ContextGatherer
from fimble.completion.context.recent import RecentRegions
from fimble.errors import FimbleError, IndexLocked
from fimble.indexer.ignore import is_secret_name
from fimble.server.index_runner import Progress, Snippet

if TYPE_CHECKING:
    from fimble.indexer import Progress as IndexProgress
    from fimble.indexer import WorkspaceIndex

__all__ = ["WorkspaceIndexes"]

log = logging.getLogger(__name__)


class WorkspaceIndexes:
    """Opens, watches and queries the index of each workspace folder."""

    def __init__(self, *, watch: bool = True) -> None:
        self._watch = watch
        self._lock = threading.Lock()
        self._indexes: dict[Path, WorkspaceIndex] = {}  # root -> WorkspaceIndex
        self._gatherers: dict[Path, ContextGatherer] = {}
        self._busy = 0
        self._configured = False
        self.errors: list[str] = []
        self.recent = RecentRegions()  # absolute paths; each root's gatherer sees its own files

    # -- IndexHook -------------------------------------------------------------------------------

    def configure(self, roots: Sequence[Path], exclude: Sequence[str]) -> None:
        from fimble.indexer import IndexConfig, WorkspaceIndex

        self.close()
        config = IndexConfig(exclude=tuple(exclude))
        opened: dict[Path, WorkspaceIndex] = {}
        errors: list[str] = []
        for root in roots:
            try:
                try:
                    index = WorkspaceIndex.open(root, config)
                    index.start(watch=self._watch)
                except IndexLocked:
                    # Another fimble (an editor's, `fimble index --watch`) keeps it fresh: read it.
                    index = WorkspaceIndex.open(root, config, writable=False)
            except FimbleError as err:
                errors.append(f"{root}: {err}")
                log.warning("no index for %s: %s", root, err)
                continue
            opened[Path(root)] = index
        with self._lock:
            self._indexes = opened
            self._configured = True
            self._gatherers = {
                root: ContextGatherer(index, recent=self._recent_under(root))
                for root, index in opened.items()
            }
            self.errors = errors
            busy = self._busy
        for _ in range(busy):  # a completion already running when the roots changed
            for index in opened.values():
                index.gate.enter()

    def _owner(self, path: Path | str) -> tuple[Path, WorkspaceIndex, str] | None:
        """The folder holding ``path``, its index and the normalized relative path. ``..`` is
        resolved before the check (``WorkspaceIndex.relpath``), so a path from a client (an HTTP
        prompt's file name) can never name a file outside the workspace folders."""
        with self._lock:
            items = sorted(self._indexes.items(), key=lambda kv: len(kv[0].parts), reverse=True)
        p = Path(path)
        for root, index in items:
            rel = index.relpath(p)
            if rel is None:
                continue
            if p.is_absolute() or (root / rel).exists():
                return root, index, rel
        return None

    def is_secret(self, path: Path | str) -> bool:
        """Whether ``path`` is on the secrets list: its folder's (defaults plus ``deny``), else the
        default names. Such a file never reaches a prompt, a cache or a saved KV state."""
        owner = self._owner(path)
        if owner is not None and owner[1].is_secret(owner[2]):
            return True
        return is_secret_name(str(path))

    def _recent_under(self, root: Path) -> Callable[[str], list[ContextChunk]]:
        def shown(path: str) -> str | None:
            p = Path(path)
            return p.relative_to(root).as_posix() if p.is_absolute() and p.is_relative_to(root) else None

        return lambda rel: self.recent.chunks(exclude=rel, shown=shown)

    def note_edit(self, path: Path, text: str, line: int) -> None:
        """The editor changed ``line`` of ``path`` (unsaved): a recently edited region for context
        (never one of a secret file: it would be shown in other files' prompts)."""
        if not self.is_secret(path):
            self.recent.edited(str(path), text, line)

    def on_file_changed(self, path: Path, text: str | None) -> None:
        owner = self._owner(path)
        if owner is None:
            return
        root, index, _ = owner
        gatherer = self._gatherers.get(root)
        if gatherer is not None:
            gatherer.forget()  # definitions elsewhere may have changed
        if not index.writable:
            return
        if text is not None:
            index.update_buffer(path, text)
        elif Path(path).exists():
            index.update_file(path)
        else:
            index.remove_file(path)

    def reindex(self, progress: Progress) -> dict[str, object]:
        with self._lock:
            indexes = list(self._indexes.values())
        files = 0
        for n, index in enumerate(indexes, 1):

            def report(p: IndexProgress, n: int = n) -> None:
                progress(p.files_done, p.files_total, f"indexing folder {n}/{len(indexes)}")

            if index.writable:
                result = index.build(rebuild=True, progress=report)
                files += result.scanned
        for gatherer in self._gatherers.values():
            gatherer.forget()
        return {"roots": len(indexes), "files": files}

    def context_for(self, path: str | None, prefix: str, suffix: str) -> Sequence[Snippet]:
        if path is None:
            return ()
        owner = self._owner(path)
        if owner is None or self.is_secret(path):
            return ()
        root, _, rel = owner
        gatherer = self._gatherers[root]
        line = prefix.count("\n")
        self.recent.visited(str(root / rel), prefix + suffix, line)
        try:
            return [c.as_tuple() for c in gatherer.chunks(rel, prefix + suffix, line)]
        except FimbleError as err:  # not built yet: no context this time
            log.debug("no context for %s: %s", path, err)
            return ()

    def stats(self) -> dict[str, object]:
        with self._lock:
            indexes = dict(self._indexes)
        out: dict[str, object] = {
            "state": "ready" if indexes else "none",
            "configured": self._configured,
            "roots": [str(r) for r in indexes],
        }
        per_root = []
        for index in indexes.values():
            try:
                s = index.stats()
                per_root.append(
                    {"root": s.root, "ready": s.ready, "files": s.files, "definitions": s.definitions}
                )
            except Exception as err:  # pragma: no cover - a store closed underneath
                per_root.append({"error": str(err)})
        out["indexes"] = per_root
        if self.errors:
            out["errors"] = list(self.errors)
        return out

    # -- Busy (the engine worker) ----------------------------------------------------------------

    def enter(self) -> None:
        with self._lock:
            self._busy += 1
            indexes = list(self._indexes.values())
        for index in indexes:
            index.gate.enter()

    def exit(self) -> None:
        with self._lock:
            self._busy = max(0, self._busy - 1)
            indexes = list(self._indexes.values())
        for index in indexes:
            index.gate.exit()

    def close(self) -> None:
        with self._lock:
            indexes = list(self._indexes.values())
            self._indexes = {}
            self._gatherers = {}
        for index in indexes:
            try:
                index.close()
            except Exception:  # pragma: no cover - closing is best effort
                log.exception("closing an index failed")
