"""textDocument/completion fallback for clients without inline completion (Helix, Neovim 0.11, eglot).

The suggestion becomes one completion item whose text edit replaces the word being typed with the
word plus the continuation, so clients that filter items by the typed word keep it listed. It is
marked as fimble's (label detail, detail, documentation with the full suggestion) and sorted first.
The list is always marked incomplete, so the client asks again on the next keystroke.

Clients that expand snippets get the text as an escaped snippet: Neovim's own completion inserts a
plain-text edit only up to its first blank (``dt.date(year,``), but a snippet whole. Snippet clients
indent every following line like the cursor's line, so that indentation is taken off those lines.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from fimble.server.lsp import convert
from fimble.server.suggest import Suggestion

if TYPE_CHECKING:
    from fimble.server.documents import Document
    from fimble.server.lsp.server import FimbleServer

__all__ = ["as_snippet", "register_if_wanted", "to_item", "word_start"]

log = logging.getLogger(__name__)

TRIGGER_CHARACTERS = [".", "(", "[", "{", ",", "=", ":", " "]
_LABEL_CHARS = 60


def word_start(text: str, offset: int) -> int:
    """Start of the identifier that ends at ``offset`` (what clients filter items by)."""
    start = offset
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return start


def as_snippet(text: str, line: str) -> str | None:
    """``text`` as a snippet that expands to itself after ``line`` (the line before the cursor),
    or None when a following line is indented less than ``line`` (a snippet cannot say so)."""
    base = line[: len(line) - len(line.lstrip(" \t"))]
    first, *rest = text.split("\n")
    lines = [first]
    for following in rest:
        if following.strip() and not following.startswith(base):
            return None
        lines.append(following[len(base) :] if following.startswith(base) else following.lstrip(" \t"))
    joined = "\n".join(lines)
    return joined.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def _snippet_support(ls: FimbleServer) -> bool:
    td = ls.client_capabilities.text_document
    item_caps = td.completion.completion_item if td and td.completion else None
    return bool(item_caps and item_caps.snippet_support)


def _label(word: str, suggestion: str) -> str:
    first = suggestion.lstrip("\n").split("\n", 1)[0]
    label = word + first if not suggestion.startswith("\n") else word + "↵ " + first.strip()
    more = len(label) > _LABEL_CHARS or "\n" in suggestion.strip("\n")
    return (label[:_LABEL_CHARS].rstrip() + "…") if more else label


def _documentation(ls: FimbleServer, language: str, text: str) -> types.MarkupContent | str:
    """The full suggestion, as markdown when the client renders it (its documentationFormat)."""
    td = ls.client_capabilities.text_document
    item_caps = td.completion.completion_item if td and td.completion else None
    formats = (item_caps.documentation_format if item_caps else None) or []
    if types.MarkupKind.Markdown in formats:
        return types.MarkupContent(kind=types.MarkupKind.Markdown, value=f"```{language}\n{text}\n```")
    return text


def to_item(ls: FimbleServer, doc: Document, offset: int, suggestion: Suggestion) -> types.CompletionItem:
    start = word_start(doc.text, offset)
    word = doc.text[start:offset]
    new_text = word + suggestion.text
    line = doc.text[:offset].rsplit("\n", 1)[-1]
    snippet = as_snippet(new_text, line) if _snippet_support(ls) else None
    text_format = types.InsertTextFormat.PlainText if snippet is None else types.InsertTextFormat.Snippet
    return types.CompletionItem(
        label=_label(word, suggestion.text),
        label_details=types.CompletionItemLabelDetails(description="fimble"),
        kind=types.CompletionItemKind.Text,
        detail="fimble suggestion" + (" (several lines)" if "\n" in suggestion.text else ""),
        documentation=_documentation(ls, (doc.language_id or "").lower(), line + suggestion.text),
        sort_text="!fimble",  # before letters and digits: listed first
        filter_text=new_text,
        insert_text_format=text_format,
        text_edit=types.TextEdit(
            range=convert.lsp_range(ls, doc, start, offset),
            new_text=new_text if snippet is None else snippet,
        ),
        command=convert.accept_command(suggestion),
    )


async def completion(ls: FimbleServer, params: types.CompletionParams) -> types.CompletionList:
    invoked = params.context is None or params.context.trigger_kind == types.CompletionTriggerKind.Invoked
    doc, offset = convert.cursor(ls, params.text_document.uri, params.position)
    empty = types.CompletionList(is_incomplete=True, items=[])
    if not invoked and not (ls.enabled and ls.settings.language_enabled(doc.language_id)):
        return empty
    suggestion = await ls.suggester.suggest(
        convert.query_for(ls, doc, doc.text, offset, invoked), ls.settings
    )
    if suggestion is None:
        return empty
    convert.record_served(ls, suggestion, "completion", doc, invoked)
    return types.CompletionList(is_incomplete=True, items=[to_item(ls, doc, offset, suggestion)])


def register_if_wanted(server: FimbleServer, capabilities: types.ClientCapabilities) -> None:
    """Offer completion items when the settings say so, or ("auto") when the client cannot show
    inline completions."""
    mode = server.settings.completion_fallback
    has_inline = bool(capabilities.text_document and capabilities.text_document.inline_completion)
    if mode == "never" or (mode == "auto" and has_inline):
        return
    options = types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS, resolve_provider=False)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, options)
    async def handler(params: types.CompletionParams) -> types.CompletionList:
        return await completion(server, params)
