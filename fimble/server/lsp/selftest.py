"""``fimble serve --tcp ... --self-test PATH:LINE:COL``: the server completes a file through its own socket.

A real LSP client (pygls') connects to the listening port, opens the file, waits for the model,
asks for an inline completion at the location and prints it on stderr; then it disconnects and the
server goes on serving. ``make run`` uses it to show that the whole path works, end to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from fimble import __version__
from fimble.errors import FimbleError
from fimble.server.positions import Encoding, index_to_units

__all__ = ["SelfTest", "run_self_test"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SelfTest:
    path: Path
    text: str
    line: int  # 1-based, as compilers print them
    column: int  # 1-based, in characters
    language: str = "python"
    timeout_s: float = 300.0  # loading a model from a cold disk can take a while


def _position(test: SelfTest) -> types.Position:
    line_text = test.text.split("\n")[test.line - 1]
    return types.Position(test.line - 1, index_to_units(line_text, test.column - 1, Encoding.UTF16))


async def _wait_ready(client: LanguageClient, deadline: float) -> dict:
    while True:
        status = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="fimble.status")
        )
        state = status["model"]["state"]
        if state == "ready":
            return status
        if state == "error":
            raise FimbleError(status["model"].get("error", "the model failed to load"))
        if time.monotonic() > deadline:
            raise FimbleError("the model did not load in time; see `fimble doctor`")
        await asyncio.sleep(0.2)


async def run_self_test(host: str, port: int, test: SelfTest) -> str:
    """Complete ``test`` through the server at ``host:port``; returns the suggestion."""
    client = LanguageClient("fimble-self-test", __version__)
    await client.start_tcp(host, port)
    try:
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=test.path.resolve().parent.as_uri(),
                initialization_options={"deadlineMs": 60_000, "acceptanceLog": False},
            )
        )
        client.initialized(types.InitializedParams())
        uri = test.path.resolve().as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, test.language, 1, test.text))
        )
        await _wait_ready(client, time.monotonic() + test.timeout_s)
        started = time.monotonic()
        result = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
                text_document=types.TextDocumentIdentifier(uri),
                position=_position(test),
            )
        )
        elapsed_ms = (time.monotonic() - started) * 1000
        items = result.items if isinstance(result, types.InlineCompletionList) else list(result or [])
        if not items:
            raise FimbleError("the server returned no suggestion; run `fimble complete` to see why")
        suggestion = items[0].insert_text
        text = suggestion if isinstance(suggestion, str) else suggestion.value
        status = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="fimble.status")
        )
        log.info("self-test took %.0f ms: %s", elapsed_ms, status.get("last"))
        await client.shutdown_async(None)
        client.exit(None)
        return text
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.stop(), 5.0)
