"""Document sync and workspace changes: keep snapshots current, tell the index what changed.

These run on the event loop for every keystroke, so they only splice strings; the index is told
through ``IndexRunner``, which does its work on its own thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from fimble.server.documents import Change, UnknownDocument
from fimble.server.lsp.convert import uri_path
from fimble.server.positions import PositionError

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["register"]

log = logging.getLogger(__name__)


def _change(event: types.TextDocumentContentChangeEvent) -> Change:
    if isinstance(event, types.TextDocumentContentChangePartial):
        r = event.range
        return Change(event.text, ((r.start.line, r.start.character), (r.end.line, r.end.character)))
    return Change(event.text)


def register(server: FimbleServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        d = params.text_document
        server.documents.open(d.uri, d.text, d.version, d.language_id)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        d = params.text_document
        changes = [_change(c) for c in params.content_changes]
        try:
            doc = server.documents.change(d.uri, d.version, changes, server.encoding)
        except (UnknownDocument, PositionError) as err:
            # Out of sync: the client will resend the whole text on reopen; requests until then
            # get an error naming the document rather than a suggestion for the wrong text.
            log.error("didChange %s (version %s) not applied: %s", d.uri, d.version, err)
            server.documents.close(d.uri)
            return
        edited = [c.range for c in changes if c.range is not None]
        if edited and (path := uri_path(d.uri)) is not None:
            server.ctx.index.note_edit(path, doc.text, edited[-1][0][0])

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if (path := uri_path(uri)) is None:
            return
        doc = server.documents.find(uri)
        server.ctx.index.file_changed(path, params.text or (doc.text if doc else None))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        server.documents.close(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        for event in params.changes:
            if (path := uri_path(event.uri)) is not None:
                server.ctx.index.file_changed(path, None)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_workspace_folders(params: types.DidChangeWorkspaceFoldersParams) -> None:
        removed = {p for f in params.event.removed if (p := uri_path(f.uri)) is not None}
        added = [p for f in params.event.added if (p := uri_path(f.uri)) is not None]
        server.roots = [r for r in server.roots if r not in removed] + [
            a for a in added if a not in server.roots
        ]
        server.ctx.index.configure(server.roots, server.settings.index_exclude)
