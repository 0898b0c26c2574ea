"""The ``fimble.speculative`` setting reaches the real engine: drafts are checked, then none are."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.server.lsp.conftest import inline_params, open_doc, start_neovim_session, status, stop

pytestmark = [pytest.mark.model, pytest.mark.asyncio(loop_scope="module")]

# The next line copies the pattern of the ones above it: prompt lookup drafts most of it.
DOC = "".join(f"    parser.add_argument('--level-{i}', type=int, default={i})\n" for i in range(6)) + "    \n"
LINE, COL = 6, 4


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    c = await start_neovim_session(tmp_path_factory.mktemp("ws"), tmp_path_factory.mktemp("home"))
    yield c
    await stop(c)


async def _engine_after_request(client: LanguageClient, name: str) -> dict[str, Any]:
    uri = (client.root / name).as_uri()  # type: ignore[attr-defined]
    open_doc(client, uri, DOC)
    await client.text_document_inline_completion_async(inline_params(uri, LINE, COL))
    return (await status(client))["last"]["engine"]


async def _configure(client: LanguageClient, speculative: bool) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimble": {"speculative": speculative}})
    )
    for _ in range(100):
        if (await status(client))["settings"].get("speculative") == speculative:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("setting not applied")


async def test_speculative_setting_turns_drafting_on_and_off(client: LanguageClient, tmp_path: Path) -> None:
    on = await _engine_after_request(client, "on.py")
    assert on["tokens_generated"] > 0 and on["drafted"] > 0 and on["accepted"] > 0
    await _configure(client, False)
    off = await _engine_after_request(client, "off.py")
    assert off["tokens_generated"] > 0 and off["drafted"] == 0
    await _configure(client, True)
