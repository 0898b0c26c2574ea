"""Helpers for driving the real `fimble serve` process with pytest-lsp's client."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import register_lsp_features

SERVER = [sys.executable, "-m", "fimble", "serve"]
TEST_MODEL = "qwen2.5-coder-0.5b"
# Small generations keep the real-model tests fast; a generous deadline keeps them deterministic on
# a slow CI machine (the deadline path has its own unit tests).
MODEL_OPTIONS: dict[str, Any] = {"maxTokens": 24, "deadlineMs": 60_000}


def model_path() -> str:
    """The test model's file, so servers can run with an empty FIMBLE_HOME of their own."""
    from fimble.errors import FimbleError
    from fimble.models import store

    try:
        return str(store.resolve(TEST_MODEL))
    except FimbleError as err:
        pytest.skip(f"{TEST_MODEL} is not available: {err}")


def env(home: Path, **extra: str) -> dict[str, str]:
    out = dict(os.environ)
    out.pop("FIMBLE_KV_STATE_DIR", None)  # each server keeps its saved KV states in its own home
    out["FIMBLE_HOME"] = str(home)
    # A native crash (llama.cpp) then leaves every thread's Python stack on stderr, which pytest-lsp
    # forwards to the test's captured stderr; without it a segfault leaves no trace at all.
    out["PYTHONFAULTHANDLER"] = "1"
    out.update(extra)
    return out


class _Client(LanguageClient):
    """pytest-lsp's client, saying how the server ended when it ended without being asked to."""

    exit_sent = False

    def exit(self, params: None) -> None:
        self.exit_sent = True
        super().exit(params)

    async def server_exit(self, server: asyncio.subprocess.Process) -> None:
        if not (self.exit_sent or self._stop_event.is_set()):  # a crash, or an exit nobody asked for
            code = server.returncode
            why = f" ({signal.Signals(-code).name})" if code is not None and code < 0 else ""
            sys.stderr.write(f"fimble serve (pid {server.pid}) exited on its own: return code {code}{why}\n")
        await super().server_exit(server)


def _client() -> LanguageClient:
    client = _Client(converter_factory=default_converter)
    register_lsp_features(client)
    return client


async def start(
    args: list[str],
    server_env: dict[str, str],
    *,
    capabilities: types.ClientCapabilities | None = None,
    options: dict[str, Any] | None = None,
    root: Path | None = None,
) -> LanguageClient:
    client = await ClientServerConfig([*SERVER, *args], _client, server_env).start()
    assert isinstance(client, LanguageClient)
    await initialize(client, capabilities=capabilities, options=options, root=root)
    return client


async def start_neovim_session(root: Path, home: Path) -> LanguageClient:
    """The real model's server as Neovim 0.11 sees it (work-done progress, UTF-8 offered, no inline
    completion UI) on workspace ``root``; returns once the model is loaded."""
    client = await start(
        ["-m", model_path()],
        env(home),
        capabilities=client_capabilities("neovim@v0.11.0"),
        options=MODEL_OPTIONS,
        root=root,
    )
    client.root = root  # type: ignore[attr-defined]
    st = await wait_model(client)
    assert st["model"]["state"] == "ready", st
    return client


async def initialize(
    client: LanguageClient,
    *,
    capabilities: types.ClientCapabilities | None = None,
    options: dict[str, Any] | None = None,
    root: Path | None = None,
) -> types.InitializeResult:
    folders = [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)] if root else None
    return await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities or types.ClientCapabilities(),
            initialization_options=options,
            root_uri=root.as_uri() if root else None,
            workspace_folders=folders,
        )
    )


async def status(client: LanguageClient) -> dict[str, Any]:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="fimble.status"))


async def wait_model(client: LanguageClient, timeout: float = 300.0) -> dict[str, Any]:
    """Poll `fimble.status` until the model is loaded (or failed to load)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        st = await status(client)
        if st["model"]["state"] != "loading" or loop.time() > end:
            return st
        await asyncio.sleep(0.1)


def open_doc(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, language, 1, text))
    )


def inline_params(
    uri: str,
    line: int,
    character: int,
    *,
    invoked: bool = True,
    selected: types.SelectedCompletionInfo | None = None,
) -> types.InlineCompletionParams:
    kind = (
        types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    )
    return types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=kind, selected_completion_info=selected),
        text_document=types.TextDocumentIdentifier(uri),
        position=types.Position(line, character),
    )


def insert_texts(result: Any) -> list[str]:
    items = result.items if isinstance(result, types.InlineCompletionList) else list(result or [])
    return [i.insert_text if isinstance(i.insert_text, str) else i.insert_text.value for i in items]


def send_raw(client: LanguageClient, method: str, params: Any) -> asyncio.Future[Any]:
    """A request exactly as given (the typed client refuses to build invalid params)."""
    msg_id = f"raw-{uuid.uuid4().hex[:8]}"
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    client.protocol._request_futures[msg_id] = future
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    client.protocol.writer.write(f"Content-Length: {len(body)}\r\n\r\n{body}".encode())  # type: ignore[union-attr]
    return asyncio.wrap_future(future)


async def stop(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()
