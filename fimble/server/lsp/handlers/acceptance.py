"""Copilot-style acceptance notifications: textDocument/didShowCompletion and
textDocument/didPartiallyAcceptCompletion. Logged locally (``fimble.server.acceptance``), never sent.

lsprotocol does not know these methods, so pygls hands their params over as nested namedtuples (or
dicts): ``{"item": InlineCompletionItem}`` and ``{"item": ..., "acceptedLength": n}``. The suggestion
id is the argument of the item's ``fimble.accept`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["DID_PARTIALLY_ACCEPT", "DID_SHOW", "register", "suggestion_id"]

DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def suggestion_id(params: Any) -> str | None:
    args = _get(_get(_get(params, "item"), "command"), "arguments")
    if isinstance(args, list | tuple) and args and isinstance(args[0], str):
        return args[0]
    return None


def register(server: FimbleServer) -> None:
    def log_event(event: str, params: Any, **extra: object) -> None:
        if (sid := suggestion_id(params)) is None:
            return
        if (err := server.ctx.acceptance.event(event, sid, **extra)) is not None:
            server.tell(str(err))

    @server.feature(DID_SHOW)
    def did_show(params: Any) -> None:
        log_event("shown", params)

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept(params: Any) -> None:
        length = _get(params, "acceptedLength")
        log_event("partial", params, accepted_chars=length if isinstance(length, int) else None)
