"""LSP params -> plain values and back, shared by the completion features.

Errors a client can cause (unknown document, a position past the end or inside a character) become
JSON-RPC errors here, so handlers stay a few lines and the server never dies on bad input.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.uris import to_fs_path

from fimble.server.acceptance import Served
from fimble.server.documents import Document, DocumentTooLarge, UnknownDocument
from fimble.server.positions import PositionError
from fimble.server.suggest import Query, Suggestion

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = [
    "REQUEST_FAILED",
    "accept_command",
    "cursor",
    "lsp_range",
    "offset_of",
    "prompt_path",
    "query_for",
    "record_served",
    "uri_path",
]

REQUEST_FAILED = -32803  # LSP: the request was valid but could not be served


def uri_path(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


def prompt_path(roots: list[Path], uri: str) -> str | None:
    """The path the model sees: relative to the workspace folder holding the file, else its name."""
    path = uri_path(uri)
    if path is None:
        return uri.rsplit("/", 1)[-1] or None
    for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return path.name


def offset_of(ls: FimbleServer, doc: Document, position: types.Position) -> int:
    try:
        return doc.offset(position.line, position.character, ls.encoding)
    except PositionError as err:
        raise JsonRpcInvalidParams(f"{doc.uri}: {err}") from None


def cursor(ls: FimbleServer, uri: str, position: types.Position) -> tuple[Document, int]:
    """The snapshot and code point offset for a request, or the JSON-RPC error explaining why not."""
    try:
        doc = ls.documents.get(uri)
        doc.check_size()
    except UnknownDocument as err:
        raise JsonRpcInvalidParams(str(err)) from None
    except DocumentTooLarge as err:
        raise JsonRpcException(str(err), code=REQUEST_FAILED) from None
    return doc, offset_of(ls, doc, position)


def lsp_range(ls: FimbleServer, doc: Document, start: int, end: int) -> types.Range:
    (l0, c0), (l1, c1) = doc.lines.position(start, ls.encoding), doc.lines.position(end, ls.encoding)
    return types.Range(types.Position(l0, c0), types.Position(l1, c1))


def query_for(ls: FimbleServer, doc: Document, text: str, offset: int, invoked: bool) -> Query:
    path = prompt_path(ls.roots, doc.uri)
    return Query(
        key=f"{ls.connection_id} {doc.uri}",
        text=text,
        offset=offset,
        path=path,
        language=doc.language_id or None,
        invoked=invoked,
        received=time.monotonic(),
        secret=ls.ctx.index.is_secret(uri_path(doc.uri) or path),
    )


def accept_command(suggestion: Suggestion) -> types.Command:
    """Run by the client after the user accepts the item: the acceptance signal, kept locally."""
    return types.Command(title="fimble: accepted", command="fimble.accept", arguments=[suggestion.id])


def record_served(ls: FimbleServer, suggestion: Suggestion, kind: str, doc: Document, invoked: bool) -> None:
    served = Served(
        id=suggestion.id,
        kind=kind,
        language=doc.language_id,
        trigger="invoked" if invoked else "automatic",
        chars=len(suggestion.text),
        lines=suggestion.text.count("\n") + 1,
        model=str(ls.ctx.completer.model or "default"),
        latency_ms=suggestion.latency_ms,
    )
    if (err := ls.ctx.acceptance.served(served)) is not None:
        ls.tell(str(err))
