"""textDocument/inlineCompletion (LSP 3.18): the suggestion shown as ghost text at the cursor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from fimble.server.lsp import convert
from fimble.server.suggest import apply_selected, mid_word

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["register"]


def _empty() -> types.InlineCompletionList:
    return types.InlineCompletionList(items=[])


async def inline_completion(
    ls: FimbleServer, params: types.InlineCompletionParams
) -> types.InlineCompletionList:
    invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    doc, offset = convert.cursor(ls, params.text_document.uri, params.position)
    if not invoked and not (ls.enabled and ls.settings.language_enabled(doc.language_id)):
        return _empty()
    text, at = doc.text, offset
    replace = types.Range(params.position, params.position)
    prefix = ""
    if (selected := params.context.selected_completion_info) is not None:
        # The suggestion must extend the item selected in the completion widget: complete after it
        # and offer the item's text plus the continuation over the item's range.
        start = convert.offset_of(ls, doc, selected.range.start)
        end = convert.offset_of(ls, doc, selected.range.end)
        text, at = apply_selected(doc.text, offset, start, end, selected.text)
        replace, prefix = selected.range, selected.text
    elif not invoked and mid_word(text, at):
        return _empty()
    suggestion = await ls.suggester.suggest(convert.query_for(ls, doc, text, at, invoked), ls.settings)
    if suggestion is None:
        return _empty()
    convert.record_served(ls, suggestion, "inline", doc, invoked)
    item = types.InlineCompletionItem(
        insert_text=prefix + suggestion.text,
        range=replace,
        command=convert.accept_command(suggestion),
    )
    return types.InlineCompletionList(items=[item])


def register(server: FimbleServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def handler(params: types.InlineCompletionParams) -> types.InlineCompletionList:
        return await inline_completion(server, params)
