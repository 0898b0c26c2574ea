"""The real server with the real 0.5B model, driven by pytest-lsp: what an editor session does.

One server for the module (the model loads once); each test uses its own document.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import LanguageClient

from tests.server.lsp.conftest import (
    MODEL_OPTIONS,
    inline_params,
    insert_texts,
    open_doc,
    start_neovim_session,
    status,
    stop,
    wait_model,
)

pytestmark = [pytest.mark.model, pytest.mark.asyncio(loop_scope="module")]

DATES = (
    "import datetime as dt\n\n\n"
    "def parse_dates(rows):\n"
    '    """Turn (year, month, day) rows into dates."""\n'
    "    dates = []\n"
    "    for year, month, day in rows:\n"
    "        dates.append()\n"
    "    return dates\n"
)
CALL_LINE, CALL_COL = 7, len("        dates.append(")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    c = await start_neovim_session(tmp_path_factory.mktemp("workspace"), home)
    yield c
    await stop(c)


def _uri(client: LanguageClient, name: str) -> str:
    return (client.root / name).as_uri()  # type: ignore[attr-defined]


def _change(uri: str, version: int, line: int, col: int, text: str) -> types.DidChangeTextDocumentParams:
    at = types.Position(line, col)
    return types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)],
    )


async def _configure(client: LanguageClient, **settings: Any) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimble": settings})
    )
    for _ in range(100):  # notifications have no reply: wait until status shows the change
        current = (await status(client))["settings"]
        if all(current.get(_snake(k)) == v for k, v in settings.items()):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"settings not applied: {settings}")


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


async def test_model_loading_was_reported_as_progress(client: LanguageClient) -> None:
    reports: list[Any] = []
    for _ in range(100):  # the end report follows the load by up to one poll
        bars = [v for v in client.progress_reports.values() if v and "loading model" in (v[0].message or "")]
        reports = bars[0] if bars else []
        if reports and reports[-1].kind == "end":
            break
        await asyncio.sleep(0.05)
    assert [r.kind for r in reports][:1] == ["begin"] and "loading model" in (reports[0].message or "")
    assert reports[-1].kind == "end" and "ready" in (reports[-1].message or "")


async def test_invoked_inline_completion(client: LanguageClient) -> None:
    uri = _uri(client, "invoked.py")
    open_doc(client, uri, DATES)
    result = await client.text_document_inline_completion_async(inline_params(uri, CALL_LINE, CALL_COL))
    assert isinstance(result, types.InlineCompletionList) and len(result.items) == 1
    item = result.items[0]
    assert item.insert_text.strip()  # type: ignore[union-attr]
    assert item.range == types.Range(types.Position(CALL_LINE, CALL_COL), types.Position(CALL_LINE, CALL_COL))
    assert item.command is not None and item.command.command == "fimble.accept"
    last = (await status(client))["last"]
    assert last["outcome"] == "served" and last["engine"]["tokens_generated"] >= 1


async def test_typing_session_one_request_per_keystroke(client: LanguageClient) -> None:
    """Each keystroke: didChange, then an automatic inline request that supersedes the previous one."""
    uri = _uri(client, "typing.py")
    text = DATES.replace("        dates.append()\n", "        \n")
    open_doc(client, uri, text)
    typed = "dates.append(dt.date("
    pending = []
    for i, ch in enumerate(typed):
        client.text_document_did_change(_change(uri, i + 2, CALL_LINE, 8 + i, ch))
        params = inline_params(uri, CALL_LINE, 8 + i + 1, invoked=False)
        pending.append(asyncio.ensure_future(client.text_document_inline_completion_async(params)))
        await asyncio.sleep(0.03)  # a fast typist
    results = await asyncio.gather(*pending)
    last = insert_texts(results[-1])
    assert len(last) == 1 and last[0].strip(), results[-1]
    # Older keystrokes were superseded (empty), never answered with text for an older document.
    assert sum(1 for r in results[:-1] if insert_texts(r)) < len(typed) - 1
    st = await status(client)
    assert st["requests"]["requests"] >= 1


async def test_typing_through_the_suggestion_answers_without_the_model(client: LanguageClient) -> None:
    uri = _uri(client, "through.py")
    open_doc(client, uri, DATES)
    first = insert_texts(
        await client.text_document_inline_completion_async(inline_params(uri, CALL_LINE, CALL_COL))
    )
    assert first and len(first[0]) > 1, first
    client.text_document_did_change(_change(uri, 2, CALL_LINE, CALL_COL, first[0][0]))
    params = inline_params(uri, CALL_LINE, CALL_COL + 1, invoked=False)
    second = insert_texts(await client.text_document_inline_completion_async(params))
    assert second == [first[0][1:]]
    st = await status(client)
    assert st["last"]["engine"]["stop_reason"] == "typed_through", st["last"]
    assert st["requests"]["typed_through"] >= 1


async def test_newer_request_supersedes_the_running_one(client: LanguageClient) -> None:
    uri = _uri(client, "supersede.py")
    open_doc(client, uri, DATES)
    first = asyncio.ensure_future(
        client.text_document_inline_completion_async(inline_params(uri, CALL_LINE, CALL_COL))
    )
    await asyncio.sleep(0.05)
    second = await client.text_document_inline_completion_async(inline_params(uri, CALL_LINE, CALL_COL))
    assert insert_texts(await first) == []
    assert insert_texts(second) and insert_texts(second)[0].strip()


async def test_cancel_request_answers_32800_and_the_next_request_is_served(client: LanguageClient) -> None:
    uri = _uri(client, "cancel.py")
    # A long list: the model would go on for all 400 tokens.
    open_doc(client, uri, "# All 50 US states with their capitals, one per line.\nSTATES = [\n    ")
    await _configure(client, maxTokens=400, multiline="always")
    try:
        before = (await status(client))["requests"]
        future = client.protocol.send_request(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, 2, 4), msg_id="cancel-me"
        )
        for _ in range(200):  # submitted to the engine...
            if (await status(client))["requests"]["requests"] > before["requests"]:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)  # ...and past its short prompt, generating up to 400 tokens
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancel-me"))
        with pytest.raises(JsonRpcRequestCancelled) as info:
            await asyncio.wrap_future(future)
        assert info.value.code == -32800
        # The engine stopped (counted as cancelled) instead of generating 400 tokens.
        for _ in range(200):
            now = (await status(client))["requests"]
            if now["cancelled"] > before["cancelled"]:
                break
            await asyncio.sleep(0.05)
        assert now["cancelled"] > before["cancelled"]
        assert (await status(client))["last"]["outcome"] == "cancelled"
    finally:
        await _configure(client, maxTokens=MODEL_OPTIONS["maxTokens"], multiline="auto")
    result = await client.text_document_inline_completion_async(inline_params(uri, 2, 4))
    assert insert_texts(result) and insert_texts(result)[0].strip()


async def test_selected_completion_item_is_extended(client: LanguageClient) -> None:
    uri = _uri(client, "selected.py")
    text = DATES.replace("dates.append()", "dates.ap")
    open_doc(client, uri, text)
    col = len("        dates.ap")
    word = types.Range(types.Position(CALL_LINE, col - 2), types.Position(CALL_LINE, col))
    params = inline_params(
        uri, CALL_LINE, col, selected=types.SelectedCompletionInfo(range=word, text="append")
    )
    result = await client.text_document_inline_completion_async(params)
    [item] = result.items  # type: ignore[union-attr]
    assert item.range == word
    assert item.insert_text.startswith("append") and len(item.insert_text) > len("append")  # type: ignore[union-attr]


async def test_completion_fallback_item_on_a_cjk_and_emoji_line(client: LanguageClient) -> None:
    """Neovim 0.11 has no inline UI: one marked item whose edit lands where the client means (UTF-8)."""
    uri = _uri(client, "fallback.py")
    line = 'greeting = "日本😀"; print(greet'
    open_doc(client, uri, f"def main():\n    {line}\n")
    col8 = len(f"    {line}".encode())  # the server chose UTF-8 (offered by this client)
    result = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(1, col8),
            context=types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked),
        )
    )
    assert isinstance(result, types.CompletionList) and result.is_incomplete
    [item] = result.items
    assert item.label_details.description == "fimble"  # type: ignore[union-attr]
    edit = item.text_edit
    assert isinstance(edit, types.TextEdit)
    word_start = len(f"    {line}".encode()) - len("greet")
    assert edit.range == types.Range(types.Position(1, word_start), types.Position(1, col8))
    assert edit.new_text.startswith("greet") and len(edit.new_text) > len("greet")
    assert item.filter_text == edit.new_text and item.command.command == "fimble.accept"  # type: ignore[union-attr]


async def test_settings_enable_languages_and_toggle(client: LanguageClient) -> None:
    uri = _uri(client, "settings.py")
    open_doc(client, uri, DATES)
    automatic = inline_params(uri, CALL_LINE, CALL_COL, invoked=False)
    await _configure(client, languages={"python": False})
    assert insert_texts(await client.text_document_inline_completion_async(automatic)) == []
    await _configure(client, languages={"python": True})
    toggle = types.ExecuteCommandParams(command="fimble.toggle", arguments=[False])
    assert await client.workspace_execute_command_async(toggle) == {"enabled": False}
    assert insert_texts(await client.text_document_inline_completion_async(automatic)) == []
    # Explicit invocation still works while automatic suggestions are off.
    invoked = inline_params(uri, CALL_LINE, CALL_COL)
    assert insert_texts(await client.text_document_inline_completion_async(invoked))
    toggle = types.ExecuteCommandParams(command="fimble.toggle", arguments=[True])
    await client.workspace_execute_command_async(toggle)
    await _configure(client, maxTokens=1)
    [text] = insert_texts(await client.text_document_inline_completion_async(automatic))
    assert (await status(client))["last"]["engine"]["tokens_generated"] == 1 and text
    await _configure(client, maxTokens=MODEL_OPTIONS["maxTokens"])


async def test_bad_model_setting_is_named_and_the_model_stays(client: LanguageClient) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimble": {"model": "/nowhere/model.gguf"}})
    )
    for _ in range(100):
        if any("fimble.model" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.05)
    message = next(m.message for m in client.messages if "fimble.model" in m.message)
    assert "/nowhere/model.gguf" in message and "keeping" in message
    st = await status(client)
    assert st["model"]["state"] == "ready"
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimble": {"model": None}})
    )


async def test_acceptance_signals_are_logged_locally(client: LanguageClient, home: Path) -> None:
    uri = _uri(client, "accept.py")
    open_doc(client, uri, DATES)
    result = await client.text_document_inline_completion_async(inline_params(uri, CALL_LINE, CALL_COL))
    [item] = result.items  # type: ignore[union-attr]
    sid = item.command.arguments[0]  # type: ignore[union-attr,index]
    raw_item = {
        "insertText": item.insert_text,
        "command": {"title": "t", "command": "fimble.accept", "arguments": [sid]},
    }
    client.protocol.notify("textDocument/didShowCompletion", {"item": raw_item})
    client.protocol.notify(
        "textDocument/didPartiallyAcceptCompletion", {"item": raw_item, "acceptedLength": 3}
    )
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="fimble.accept", arguments=[sid])
    )
    log = home / "acceptance.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [e["event"] for e in events if e["id"] == sid]
    assert mine == ["served", "shown", "partial", "accepted"]
    assert all("insertText" not in e and "text" not in e for e in events)


async def test_saves_and_watched_files_reach_the_index_hook(client: LanguageClient) -> None:
    uri = _uri(client, "saved.py")
    open_doc(client, uri, DATES)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri))
    )
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri, type=types.FileChangeType.Changed)]
        )
    )
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="fimble.reindex")
    )
    assert "index" in result
    st = await status(client)
    assert st["roots"] == [str(client.root)]  # type: ignore[attr-defined]
    assert st["position_encoding"] == "utf-8"


async def test_threads_setting_reloads_the_model_with_progress(client: LanguageClient) -> None:
    """Last in the module: it swaps the shared model (a new llama context with 1 thread)."""
    begins = sum(1 for values in client.progress_reports.values() for r in values if r.kind == "begin")
    await _configure(client, threads=1)
    st = await wait_model(client)
    assert st["model"]["state"] == "ready" and st["model"]["threads"] == 1
    uri = _uri(client, "reloaded.py")
    open_doc(client, uri, DATES)
    assert insert_texts(
        await client.text_document_inline_completion_async(inline_params(uri, CALL_LINE, CALL_COL))
    )
    for _ in range(100):
        reports = [r for values in client.progress_reports.values() for r in values]
        if sum(1 for r in reports if r.kind == "begin") > begins and reports[-1].kind == "end":
            break
        await asyncio.sleep(0.05)
    assert sum(1 for r in reports if r.kind == "begin") > begins
