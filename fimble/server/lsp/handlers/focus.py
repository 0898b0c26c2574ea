"""textDocument/didFocus: the editor says which document (and, with fimble's clients, where in it)
the user is now, so the suggestion there is started before the first keystroke asks for it.

Copilot's language server takes the same notification with ``{"textDocument": {"uri"}}``; fimble's
editor plugins add the cursor as ``"position"`` when the user switches files or stops moving the
cursor. Without a position there is nothing to warm (no cursor), and the notification is ignored.
lsprotocol does not know the method, so pygls hands the params over as namedtuples or dicts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fimble.server.documents import DocumentTooLarge, UnknownDocument
from fimble.server.lsp import convert
from fimble.server.positions import PositionError
from fimble.server.suggest import mid_word

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["DID_FOCUS", "register"]

log = logging.getLogger(__name__)

DID_FOCUS = "textDocument/didFocus"


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


async def did_focus(ls: FimbleServer, params: Any) -> bool:
    """Warm the suggestion at the focused cursor; returns whether the model was given work."""
    uri, pos = _get(_get(params, "textDocument"), "uri"), _get(params, "position")
    line, character = _get(pos, "line"), _get(pos, "character")
    if not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
        return False
    try:
        doc = ls.documents.get(uri)
        doc.check_size()
        offset = doc.offset(line, character, ls.encoding)
    except (UnknownDocument, DocumentTooLarge, PositionError):
        return False  # a document not (yet) open, or a stale position: the next request tells
    if not (ls.enabled and ls.settings.language_enabled(doc.language_id)) or mid_word(doc.text, offset):
        return False
    query = convert.query_for(ls, doc, doc.text, offset, invoked=False)
    try:
        return await ls.suggester.warm(query, ls.settings)
    except Exception:  # a notification has nobody to answer: log, never take the server down
        log.exception("warming the suggestion at %s:%d failed", uri, line + 1)
        return False


def register(server: FimbleServer) -> None:
    @server.feature(DID_FOCUS)
    async def handler(params: Any) -> None:
        await did_focus(server, params)
