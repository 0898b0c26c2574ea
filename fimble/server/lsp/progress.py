"""Work-done progress (``$/progress``) for model loading and indexing, when the client supports it.

The server keeps answering requests while the work runs; progress only tells the user why
suggestions are empty for now.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["WorkDone", "watch_index", "watch_model"]

log = logging.getLogger(__name__)
_CREATE_TIMEOUT_S = 5.0


class WorkDone:
    """One progress bar; every method is a no-op when the client has no work-done progress."""

    def __init__(self, ls: FimbleServer, title: str) -> None:
        self.ls = ls
        self.title = title
        self.token = f"fimble-{uuid.uuid4().hex[:8]}"
        self.active = False

    async def begin(self, message: str, percentage: int | None = None) -> None:
        caps = self.ls.client_capabilities.window
        if not (caps and caps.work_done_progress):
            return
        try:
            await asyncio.wait_for(self.ls.work_done_progress.create_async(self.token), _CREATE_TIMEOUT_S)
        except Exception as err:  # the client refused or never answered: no progress bar
            log.info("work done progress not created: %s", err)
            return
        self.active = True
        self.ls.work_done_progress.begin(
            self.token,
            types.WorkDoneProgressBegin(title=self.title, message=message, percentage=percentage),
        )

    def report(self, message: str, percentage: int | None = None) -> None:
        if self.active:
            self.ls.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message, percentage=percentage)
            )

    def end(self, message: str) -> None:
        if self.active:
            self.active = False
            self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))


async def watch_model(ls: FimbleServer) -> None:
    """Show the model loading as progress, then one actionable message if it failed."""
    completer = ls.ctx.completer
    name = completer.model or _default_model()
    progress = WorkDone(ls, "fimble")
    if not completer.loaded:
        await progress.begin(f"loading model {name}")
        while not completer.loaded:
            await asyncio.sleep(0.1)
    if (err := completer.load_error) is not None:
        progress.end(f"model {name} failed to load")
        ls.tell(f"fimble: {err}", types.MessageType.Error)
    else:
        progress.end(f"model {name} ready")


async def watch_index(ls: FimbleServer, poll: float = 0.5) -> None:
    """Show the first indexing pass of the workspace folders as progress; completions go on meanwhile
    (without repository context until an index is ready)."""
    progress = WorkDone(ls, "fimble: indexing")
    while ls.roots:
        st = await asyncio.to_thread(ls.ctx.index.stats)
        if "indexes" not in st:  # an index without folders (tests, no index): nothing to show
            return
        indexes = [i for i in st["indexes"] if isinstance(i, dict)]
        if st.get("configured") and all(i.get("ready") for i in indexes):
            files = sum(int(i.get("files", 0)) for i in indexes)
            progress.end(f"{files} files indexed" if indexes else "no index: see the log")
            return
        files = sum(int(i.get("files", 0)) for i in indexes)
        if not progress.active:
            await progress.begin("indexing the workspace")
        progress.report(f"{files} files indexed so far")
        await asyncio.sleep(poll)


def _default_model() -> str:
    try:
        from fimble.models import registry

        return registry.default_name()
    except Exception:
        return "default"
