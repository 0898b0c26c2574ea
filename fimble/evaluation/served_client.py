"""The LSP client side of the served evaluation: one ``fimble serve`` process and its documents.

pygls's ``LanguageClient`` starts the server over stdio (``sys.executable -m fimble serve``) with a
``FIMBLE_HOME`` of its own; documents are sent whole, as an editor does on open and as a full
change, and the cursor's arrival as fimble's ``textDocument/didFocus``. Positions go out in UTF-16
code units (the encoding every client must support); the cases count code points.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fimble.errors import FimbleError
from fimble.evaluation.cases import Case

__all__ = ["ServedError", "Session", "answer_text", "small_count", "utf16_column"]

_LANGUAGE_IDS = {
    "python": "python",
    "typescript": "typescript",
    "tsx": "typescriptreact",
    "javascript": "javascript",
}
_STATUS_POLL_S = 0.25
_REQUEST_TIMEOUT_S = 180.0  # far past any server deadline: a hang, not a slow answer


class ServedError(FimbleError):
    """The server did not start, load its model or build its index."""


def utf16_column(line: str, column: int) -> int:
    """The LSP character (UTF-16 code units) of code point ``column`` in ``line``."""
    return len(line[:column].encode("utf-16-le")) // 2


def answer_text(result: Any) -> str:
    """The first item's text of an inline completion answer (a list or a bare item array)."""
    items = getattr(result, "items", result) or []
    if not items:
        return ""
    text = items[0].insert_text
    return text if isinstance(text, str) else getattr(text, "value", "")


def small_count(status: Mapping[str, Any]) -> int | None:
    """How many small first prompts the server's warmer has answered from (None: no warmer)."""
    value = (status.get("model") or {}).get("small_first_prompts")
    return value if isinstance(value, int) else None


class Session:
    """One server process on one workspace copy, and the client's view of its open documents."""

    def __init__(
        self, model_path: str, home: Path, root: Path, threads: int, options: dict[str, Any]
    ) -> None:
        from pygls.lsp.client import LanguageClient

        self.model_path, self.home, self.root, self.threads = model_path, home, root, threads
        self.options = options
        self.client = LanguageClient("fimble-eval", "1")
        self.versions: dict[str, int] = {}
        self.log_path: Path | None = None
        self._drain: asyncio.Task[None] | None = None

    def _env(self) -> dict[str, str]:
        import fimble
        from fimble import paths

        env = {**os.environ, "FIMBLE_HOME": str(self.home)}
        env.pop("FIMBLE_KV_STATE_DIR", None)  # KV states of this run only, under the fresh home
        # Which CPU path llama.cpp survives on is the machine's, not the run's: no probe again.
        env.setdefault("FIMBLE_CPU_PATH_DIR", str(paths.cache_root() / "cpu-path"))
        source = str(Path(fimble.__file__).resolve().parents[1])  # the same fimble, also from a checkout
        env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [env.get("PYTHONPATH")])])
        return env

    async def start(self, log_path: Path) -> None:
        from lsprotocol import types

        args = ["-m", "fimble", "serve", "-m", self.model_path]
        if self.threads:
            args += ["-t", str(self.threads)]
        self.log_path = log_path
        await self.client.start_io(sys.executable, *args, env=self._env(), cwd=str(self.home))
        self._drain = asyncio.create_task(self._keep_log(log_path))
        uri = self.root.as_uri()
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                initialization_options=self.options,
                root_uri=uri,
                workspace_folders=[types.WorkspaceFolder(uri=uri, name=self.root.name)],
            )
        )
        self.client.initialized(types.InitializedParams())

    async def _keep_log(self, path: Path) -> None:
        """The server's stderr to a file (nobody else reads the pipe; a full one would stall it)."""
        stream = self.client._server.stderr  # type: ignore[union-attr]
        with open(path, "ab") as f:
            while chunk := await stream.read(65536):
                f.write(chunk)
                f.flush()

    def log_tail(self, lines: int = 8) -> str:
        """The end of the server's log, to say why it stopped."""
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                return "\n".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])
        return ""

    async def status(self) -> dict[str, Any]:
        """``fimble.status``; ``ServedError`` (with the log's end) when the server is gone or hangs."""
        from lsprotocol import types

        process = self.client._server
        if process is not None and process.returncode is not None:
            raise ServedError(f"the server exited ({process.returncode}):\n{self.log_tail()}")
        try:
            return await asyncio.wait_for(
                self.client.workspace_execute_command_async(
                    types.ExecuteCommandParams(command="fimble.status")
                ),
                _REQUEST_TIMEOUT_S,
            )
        except TimeoutError:
            wait = f"{_REQUEST_TIMEOUT_S:.0f} s"
            raise ServedError(f"the server did not answer fimble.status in {wait}") from None

    async def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """Poll ``fimble.status`` until the model is loaded (with its speeds measured) and every
        workspace index is built; raise ``ServedError`` on a load error or after ``timeout_s``."""
        started = time.monotonic()
        while True:
            status = await self.status()
            model, index = status.get("model") or {}, status.get("index") or {}
            if model.get("state") == "error":
                raise ServedError(f"the server could not load the model: {model.get('error')}")
            if index.get("errors"):
                raise ServedError(f"the server could not index the workspace: {index['errors'][0]}")
            indexes = index.get("indexes") or []
            built = bool(index.get("configured") and indexes and all(i.get("ready") for i in indexes))
            # The warmer sizes small first prompts from speeds it measures in its first idle moment.
            measured = model.get("prompt_tokens_per_s", 1) or time.monotonic() - started > timeout_s / 2
            if model.get("state") == "ready" and built and measured:
                return status
            if time.monotonic() - started > timeout_s:
                raise ServedError(
                    f"the server was not ready after {timeout_s:.0f} s (model {model.get('state')}, "
                    f"index {indexes or index.get('state')})"
                )
            await asyncio.sleep(_STATUS_POLL_S)

    def show(self, case: Case, text: str, uri: str) -> None:
        """The buffer as the editor has it: opened the first time, then replaced whole."""
        from lsprotocol import types

        if uri not in self.versions:
            self.versions[uri] = 1
            language = _LANGUAGE_IDS.get(case.language, case.language)
            if case.path.endswith(".jsx"):
                language = "javascriptreact"
            item = types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
            self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
            return
        self.versions[uri] += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def focus(self, uri: str, line: int, character: int) -> None:
        """Where the cursor went, as fimble's editor plugins say it (``textDocument/didFocus``)."""
        self.client.protocol.notify(
            "textDocument/didFocus",
            {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}},
        )

    async def ask(self, uri: str, line: int, character: int, invoked: bool) -> tuple[str, float, str | None]:
        """(answer text, latency ms from request to response, error) of one inline completion."""
        from lsprotocol import types

        trigger = types.InlineCompletionTriggerKind
        kind = trigger.Invoked if invoked else trigger.Automatic
        params = types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=kind),
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
        )
        t0 = time.perf_counter()
        try:
            result = await asyncio.wait_for(
                self.client.text_document_inline_completion_async(params), _REQUEST_TIMEOUT_S
            )
        except Exception as err:  # an error answer (or a hang) is an empty answer, said as such
            return "", (time.perf_counter() - t0) * 1000, f"{type(err).__name__}: {err}"
        return answer_text(result), (time.perf_counter() - t0) * 1000, None

    async def stop(self) -> None:
        process = self.client._server
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
            await asyncio.wait_for(self.client.stop(), 10)
        except Exception:  # already gone, or not answering: the process is ours, end it
            pass
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), 10)
        if self._drain is not None:
            self._drain.cancel()
