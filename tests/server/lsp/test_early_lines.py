"""A block's first lines through the real server: shown once ``firstSuggestionMs`` has passed, the
rest written on and found by the next request without the model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

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

HEAD = 'def report(values):\n    """Print the count, the total, the mean and the largest of values."""\n'
TEXT = HEAD + "    \n"
LINE, COL = 2, 4
# Lines are taken as soon as the block has one past 1 ms (by default past 1.6 s).
OPTIONS = {**MODEL_OPTIONS, "maxTokens": 64, "firstSuggestionMs": 1}


async def _ask(client: LanguageClient, uri: str, line: int, col: int) -> list[str]:
    result = await client.text_document_inline_completion_async(inline_params(uri, line, col, invoked=False))
    return insert_texts(result)


async def test_a_block_shows_its_first_lines_and_the_next_request_gets_the_rest(tmp_path: Path) -> None:
    client = await start(["-m", model_path()], env(tmp_path / "home"), options=OPTIONS)
    try:
        assert (await wait_model(client))["model"]["state"] == "ready"
        uri = (tmp_path / "ws" / "report.py").as_uri()
        open_doc(client, uri, TEXT)
        shown = await _ask(client, uri, LINE, COL)
        st = await status(client)
        assert shown and shown[0].strip(), st["last"]
        assert st["last"]["early_lines"] is True, st["last"]
        assert st["last"]["engine"]["stop_reason"] == "adopted_lines", st["last"]
        # The user accepts what is shown and goes on at the next line: the block, written on
        # meanwhile, answers there without evaluating anything.
        accepted = HEAD + "    " + shown[0] + "\n    \n"
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=accepted)],
            )
        )
        await asyncio.sleep(0.2)
        line = accepted.count("\n") - 1
        rest = await _ask(client, uri, line, 4)
        st = await status(client)
        assert rest and rest[0].strip(), st["last"]
        assert st["last"]["engine"]["tokens_evaluated"] == 0, st["last"]
        without_model = {"typed_through", "adopted", "adopted_lines"}
        assert st["last"]["engine"]["stop_reason"] in without_model, st["last"]
    finally:
        await stop(client)
