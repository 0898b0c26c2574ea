"""The real server process without a usable model: protocol errors, messages, and a server that stays up.

No model is loaded here (the cache is empty or the file is garbage), so these run in seconds; the
real-model sessions are in test_session.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.lsp.conftest import (
    SERVER,
    TEST_MODEL,
    env,
    initialize,
    inline_params,
    insert_texts,
    open_doc,
    send_raw,
    start,
    status,
    stop,
)

URI = "file:///work/example.py"
TEXT = 'label = "日本😀"\nvalue = compute(label)\n'


@pytest.fixture
async def client(tmp_path: Path) -> LanguageClient:
    """A server whose model is missing (empty FIMBLE_HOME): it must stay up and answer everything."""
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    c = await start(["-m", TEST_MODEL], env(tmp_path / "home"), capabilities=caps)
    yield c
    await stop(c)


async def _messages(client: LanguageClient, needle: str, timeout: float = 20.0) -> list[str]:
    for _ in range(int(timeout / 0.05)):
        found = [m.message for m in client.messages if needle in m.message]
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no showMessage containing {needle!r}: {[m.message for m in client.messages]}")


async def _error(coro: object) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await coro  # type: ignore[misc]
    return info.value


async def test_missing_model_gives_one_actionable_message_and_empty_results(client: LanguageClient) -> None:
    messages = await _messages(client, "fimble models pull")
    assert len(messages) == 1 and f"fimble models pull {TEST_MODEL}" in messages[0]
    open_doc(client, URI, TEXT)
    result = await client.text_document_inline_completion_async(inline_params(URI, 1, 8))
    assert insert_texts(result) == []
    assert (await status(client))["model"]["state"] == "error"


async def test_malformed_params_are_protocol_errors_and_the_server_lives_on(client: LanguageClient) -> None:
    open_doc(client, URI, TEXT)
    err = await _error(
        client.text_document_inline_completion_async(inline_params("file:///never-opened.py", 0, 0))
    )
    assert err.code == -32602 and "didOpen" in err.message
    err = await _error(client.text_document_inline_completion_async(inline_params(URI, 99, 0)))
    assert err.code == -32602 and "past the end" in err.message
    # UTF-16 (no encoding offered): character 12 is between the two halves of the emoji.
    err = await _error(client.text_document_inline_completion_async(inline_params(URI, 0, 12)))
    assert err.code == -32602 and "inside" in err.message
    # Params that do not even parse (negative line, missing position) still get an answer.
    raw = {
        "textDocument": {"uri": URI},
        "position": {"line": -1, "character": 0},
        "context": {"triggerKind": 1},
    }
    err = await _error(send_raw(client, "textDocument/inlineCompletion", raw))
    assert err.code == -32602 and "$.params.position" in err.message
    raw = {"textDocument": {"uri": URI}, "context": {"triggerKind": 1}}
    err = await _error(send_raw(client, "textDocument/inlineCompletion", raw))
    assert err.code == -32602 and "required field missing" in err.message
    err = await _error(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command="fimble.nope"))
    )
    assert err.code == -32602
    # A character past the end of its line means the end of the line (the LSP rule): no error.
    assert insert_texts(await client.text_document_inline_completion_async(inline_params(URI, 1, 500))) == []
    assert (await status(client))["documents"] == 1


async def test_huge_document_and_lone_surrogates(client: LanguageClient) -> None:
    huge = "x = 1\n" * 1_500_000  # 9 MB, past the 8 MiB limit
    open_doc(client, "file:///work/huge.py", huge)
    err = await _error(
        client.text_document_inline_completion_async(inline_params("file:///work/huge.py", 3, 0))
    )
    assert err.code == -32803 and "limit" in err.message
    # Lone surrogates (valid JSON, invalid Unicode) are stored as U+FFFD, same code units.
    open_doc(client, "file:///work/bad.py", "s = '\ud800'\nt = ")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri="file:///work/bad.py", version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(1, 4), types.Position(1, 4)), text="'\udc01'"
                )
            ],
        )
    )
    result = await client.text_document_inline_completion_async(inline_params("file:///work/bad.py", 1, 7))
    assert insert_texts(result) == []
    st = await status(client)
    assert st["documents"] == 2


async def test_invalid_settings_are_named_and_the_rest_applies(client: LanguageClient) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimble": {"maxTokens": "many", "debounceMs": 30}})
    )
    messages = await _messages(client, "fimble.maxTokens")
    assert "expected an integer" in messages[0]
    settings = (await status(client))["settings"]
    assert settings["debounce_ms"] == 30 and settings["max_tokens"] == 64


@pytest.mark.parametrize("inline", [False, True])
async def test_capabilities(tmp_path: Path, inline: bool) -> None:
    """Inline completion is always offered; completion items only to clients without inline support."""
    caps = types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=["utf-16", "utf-8"]),
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities() if inline else None
        ),
    )
    client = await ClientServerConfig(
        server_command=[*SERVER, "-m", TEST_MODEL], server_env=env(tmp_path / "home")
    ).start()
    assert isinstance(client, LanguageClient)
    try:
        result = await initialize(client, capabilities=caps, options={"maxTokens": 8})
        cap = result.capabilities
        assert cap.inline_completion_provider is not None
        assert (cap.completion_provider is not None) is (not inline)
        assert cap.position_encoding == "utf-8"  # offered, so preferred over the client's first choice
        assert cap.text_document_sync.change == types.TextDocumentSyncKind.Incremental
        assert cap.text_document_sync.open_close and cap.text_document_sync.save
        assert {"fimble.status", "fimble.reindex", "fimble.toggle", "fimble.accept"} <= set(
            cap.execute_command_provider.commands
        )
        assert cap.workspace.workspace_folders.supported
        assert result.server_info.name == "fimble"
        toggle = types.ExecuteCommandParams(command="fimble.toggle")
        assert await client.workspace_execute_command_async(toggle) == {"enabled": False}
        toggle = types.ExecuteCommandParams(command="fimble.toggle", arguments=[True])
        assert await client.workspace_execute_command_async(toggle) == {"enabled": True}
        assert (await status(client))["settings"]["max_tokens"] == 8
    finally:
        await stop(client)


async def test_corrupt_model_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all" * 100)
    c = await start(["-m", str(bad)], env(tmp_path / "home"))
    try:
        messages = await _messages(c, "fimble")
        assert any("gguf" in m.lower() or "GGUF" in m for m in messages)
        assert (await status(c))["model"]["state"] == "error"
    finally:
        await stop(c)


async def test_unwritable_cache_is_one_message_and_the_server_stays_up(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    c = await start(["-m", TEST_MODEL], env(blocker / "home"))
    try:
        messages = await _messages(c, "cannot write to its cache")
        assert "FIMBLE_HOME" in messages[0]
        assert (await status(c))["documents"] == 0
    finally:
        await stop(c)


async def test_stdio_lsp_and_http_share_one_process(tmp_path: Path) -> None:
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = await start(["-m", TEST_MODEL, "--http", f"127.0.0.1:{port}"], env(tmp_path / "home"))
    try:
        assert (await status(c))["model"]["state"] == "error"
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            for _ in range(100):  # uvicorn binds a moment after the LSP answers
                try:
                    response = await http.get("/")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
        assert response.status_code == 200
    finally:
        await stop(c)
