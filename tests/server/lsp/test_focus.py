"""textDocument/didFocus through the real server: the suggestion where the cursor went is ready
before the first keystroke asks for it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.server.lsp.conftest import (
    MODEL_OPTIONS,
    env,
    inline_params,
    insert_texts,
    model_path,
    open_doc,
    start,
    status,
    stop,
    wait_model,
)

pytestmark = [pytest.mark.model, pytest.mark.asyncio]

TEXT = "def mean(xs):\n    total = sum(xs)\n    return \n"
LINE, COL = 2, len("    return ")


async def _until(client: Any, predicate: Any, timeout: float = 120.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        st = await status(client)
        if predicate(st):
            return st
        assert loop.time() < end, st
        await asyncio.sleep(0.1)


async def test_focusing_a_place_answers_its_first_request_without_the_model(tmp_path: Path) -> None:
    client = await start(["-m", model_path()], env(tmp_path / "home"), options=MODEL_OPTIONS)
    try:
        await wait_model(client)
        uri = (tmp_path / "stats.py").as_uri()
        open_doc(client, uri, TEXT)
        # Ignored: no position (Copilot's form), a document never opened, a position past the end.
        client.protocol.notify("textDocument/didFocus", {"textDocument": {"uri": uri}})
        client.protocol.notify(
            "textDocument/didFocus",
            {"textDocument": {"uri": uri + "x"}, "position": {"line": 0, "character": 0}},
        )
        client.protocol.notify(
            "textDocument/didFocus", {"textDocument": {"uri": uri}, "position": {"line": 99, "character": 0}}
        )
        client.protocol.notify(
            "textDocument/didFocus",
            {"textDocument": {"uri": uri}, "position": {"line": LINE, "character": COL}},
        )
        st = await _until(client, lambda s: s["requests"]["warmed"] == 1 and s["requests"]["completed"] == 1)
        evaluated = st["requests"]["tokens_evaluated"]
        assert evaluated > 0
        result = await client.text_document_inline_completion_async(inline_params(uri, LINE, COL))
        texts = insert_texts(result)
        assert texts and texts[0].strip()
        st = await status(client)
        assert st["last"]["engine"]["stop_reason"] in ("typed_through", "cached"), st["last"]
        # Answered without the model (a prefetch of the next lines may run meanwhile: not a request).
        assert st["requests"]["completed"] == 1 and st["last"]["engine"]["tokens_evaluated"] == 0
        # Focusing the same place again finds the answer known: no model work.
        client.protocol.notify(
            "textDocument/didFocus",
            {"textDocument": {"uri": uri}, "position": {"line": LINE, "character": COL}},
        )
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=2, uri=uri),
                [
                    types.TextDocumentContentChangePartial(
                        types.Range(types.Position(LINE, COL), types.Position(LINE, COL)), texts[0][0]
                    )
                ],
            )
        )
        again = insert_texts(
            await client.text_document_inline_completion_async(inline_params(uri, LINE, COL + 1))
        )
        assert again == [texts[0][1:]] or not texts[0][1:].strip()
        st = await status(client)
        assert st["requests"]["warmed"] == 1 and st["requests"]["completed"] == 1, st["requests"]
    finally:
        await stop(client)
