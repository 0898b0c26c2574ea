"""The server's view of the workspace index: a small interface the indexer will implement.

The server only tells the index what changed (roots, saved and watched files) and asks it for
context snippets; it never waits for it on the event loop. ``IndexRunner`` calls the index on its
own threads (one for updates, one for retrieval with a deadline), so a slow or failing index costs
a completion its cross-file context, never the completion itself.

``WorkspaceIndexes`` (``fimble.server.workspace_roots``: one index per workspace folder) implements it
over ``fimble.indexer`` and imports this module, never the other way; ``NullIndex`` does nothing
(tests, or a server started with no index).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from fimble.indexer.ignore import is_secret_name

__all__ = ["IndexHook", "IndexRunner", "NullIndex", "Progress", "Snippet"]

log = logging.getLogger(__name__)

# (done, total, message) while reindexing; total 0 when unknown.
Progress = Callable[[int, int, str], None]
# (path, text, reason) as ``CompletionRequest.context_files`` takes them.
Snippet = tuple[str, str, str]


class IndexHook(Protocol):
    def configure(self, roots: Sequence[Path], exclude: Sequence[str]) -> None:
        """The workspace folders to index and extra glob patterns to skip (replaces earlier ones)."""

    def on_file_changed(self, path: Path, text: str | None) -> None:
        """A file was saved or changed on disk: ``text`` is its content when the editor has it,
        None when the index should read the file (which may have been deleted)."""

    def reindex(self, progress: Progress) -> dict[str, object]:
        """Rebuild the index from scratch (blocking; runs on the index thread)."""

    def context_for(self, path: str | None, prefix: str, suffix: str) -> Sequence[Snippet]:
        """Snippets from other files worth putting in the prompt, best last."""

    def stats(self) -> dict[str, object]:
        """Numbers for ``fimble.status`` (files, chunks, state)."""

    def enter(self) -> None:
        """The model started work (a job or an idle warm-up step): background indexing steps aside
        until ``exit``. The engine worker calls it for every kind the scheduler's table lets pre-empt
        indexing (``fimble.completion.scheduler``, ``JobKind.INDEX``): all model work."""

    def exit(self) -> None:
        """The model's work ended."""


class NullIndex:
    """No index: no context, nothing to rebuild."""

    def configure(self, roots: Sequence[Path], exclude: Sequence[str]) -> None:
        self._roots = [str(r) for r in roots]

    def on_file_changed(self, path: Path, text: str | None) -> None:
        return None

    def reindex(self, progress: Progress) -> dict[str, object]:
        progress(0, 0, "no index available yet")
        return {"files": 0}

    def context_for(self, path: str | None, prefix: str, suffix: str) -> Sequence[Snippet]:
        return ()

    def stats(self) -> dict[str, object]:
        return {"state": "none", "roots": getattr(self, "_roots", [])}

    def enter(self) -> None:
        return None

    def exit(self) -> None:
        return None


class IndexRunner:
    """Runs a ``IndexHook`` off the event loop: updates in order, retrieval with a deadline."""

    def __init__(self, index: IndexHook) -> None:
        self.index = index
        self._updates = ThreadPoolExecutor(1, thread_name_prefix="fimble-index")
        self._reads = ThreadPoolExecutor(1, thread_name_prefix="fimble-retrieve")

    def _call(self, fn: Callable[..., object], *args: object) -> None:
        def run() -> None:
            try:
                fn(*args)
            except Exception:
                log.exception("index %s failed", getattr(fn, "__name__", fn))

        self._updates.submit(run)

    def configure(self, roots: Sequence[Path], exclude: Sequence[str]) -> None:
        self._call(self.index.configure, list(roots), list(exclude))

    def file_changed(self, path: Path, text: str | None) -> None:
        self._call(self.index.on_file_changed, path, text)

    def is_secret(self, path: str | Path | None) -> bool:
        """Whether ``path`` is on the secrets list (``.env``, keys, credentials, the folder's
        ``deny``): cheap (name and pattern matching), called on the event loop per request."""
        if path is None:
            return False
        check = getattr(self.index, "is_secret", None)
        try:
            return bool(check(path)) if check is not None else is_secret_name(str(path))
        except Exception:
            log.exception("secret check failed for %s; treating it as a secret", path)
            return True

    def note_edit(self, path: Path, text: str, line: int) -> None:
        """An unsaved edit at ``line``: remembered at once (O(1), on the caller's thread) by indexes
        that track recently edited regions; the text is the document's immutable snapshot."""
        note = getattr(self.index, "note_edit", None)
        if note is not None:
            try:
                note(path, text, line)
            except Exception:
                log.exception("note_edit failed")

    async def reindex(self, progress: Progress) -> dict[str, object]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._updates, self.index.reindex, progress)

    async def context_for(
        self, path: str | None, prefix: str, suffix: str, timeout: float
    ) -> tuple[Snippet, ...]:
        """Context snippets, or none when the index fails or takes longer than ``timeout``."""
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._reads, self.index.context_for, path, prefix, suffix)
        try:
            return tuple(await asyncio.wait_for(fut, timeout))
        except TimeoutError:
            log.info("index context took longer than %.0f ms; completing without it", timeout * 1000)
        except Exception:
            log.exception("index context failed; completing without it")
        return ()

    def stats(self) -> dict[str, object]:
        try:
            return dict(self.index.stats())
        except Exception as err:
            return {"state": "error", "error": str(err)}

    def close(self) -> None:
        self._updates.shutdown(wait=False, cancel_futures=True)
        self._reads.shutdown(wait=False, cancel_futures=True)
        close = getattr(self.index, "close", None)
        if close is not None:
            try:
                close()  # the indexes' writer threads and LMDB environments
            except Exception:
                log.exception("closing the index failed")
