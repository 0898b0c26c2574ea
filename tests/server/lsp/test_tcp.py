"""`fimble serve --tcp ... --http ... --self-test ...`: one process, a self-test, two editors, HTTP beside.

The process serves a completion to itself through its own socket at start-up (what `make run` shows),
then two clients with different position encodings share its model, and the HTTP API answers from
the same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.server.lsp.conftest import MODEL_OPTIONS, SERVER, env, initialize, model_path, open_doc, status

pytestmark = [pytest.mark.model, pytest.mark.asyncio(loop_scope="module")]

EXAMPLE = Path(__file__).parents[3] / "fimble" / "examples" / "dates.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, proc: asyncio.subprocess.Process, port: int, http_port: int, lines: list[str]) -> None:
        self.proc, self.port, self.http_port, self.lines = proc, port, http_port, lines


async def _read_until(
    proc: asyncio.subprocess.Process, lines: list[str], pattern: str, timeout: float
) -> str:
    assert proc.stderr is not None
    async with asyncio.timeout(timeout):
        while True:
            raw = await proc.stderr.readline()
            if not raw:
                raise AssertionError("server exited:\n" + "".join(lines))
            line = raw.decode(errors="replace")
            lines.append(line)
            if re.search(pattern, line):
                return line


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    http_port = _free_port()
    args = ["--tcp", "127.0.0.1:0", "--http", f"127.0.0.1:{http_port}", "-m", model_path()]
    args += ["--self-test", f"{EXAMPLE}:8:22"]
    proc = await asyncio.create_subprocess_exec(
        *SERVER,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env(tmp_path_factory.mktemp("home")),
    )
    lines: list[str] = []
    try:
        listening = await _read_until(proc, lines, r"LSP server listening on", 60)
        port = int(listening.rsplit(":", 1)[1])
        await _read_until(proc, lines, r"fimble: ready:", 300)
        yield Served(proc, port, http_port, lines)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()


async def _connect(port: int, encodings: list[str]) -> LanguageClient:
    client = LanguageClient()
    await client.start_tcp("127.0.0.1", port)
    caps = types.ClientCapabilities(general=types.GeneralClientCapabilities(position_encodings=encodings))
    await initialize(client, capabilities=caps, options=MODEL_OPTIONS)
    return client


async def _close(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.stop(), 5)


async def test_self_test_printed_a_real_completion(served: Served) -> None:
    [line] = [x for x in served.lines if "self-test:" in x and "->" in x]
    suggestion = line.split("->", 1)[1].strip()
    assert suggestion not in ("''", '""'), line
    assert served.proc.stdout is not None  # nothing but logs on stderr; TCP mode leaves stdout alone


async def test_two_clients_with_different_encodings_share_the_model(served: Served) -> None:
    line = 'greeting = "日本😀"; print(greet'
    text = f"def main():\n    {line}\n"
    utf16 = await _connect(served.port, ["utf-16"])
    utf8 = await _connect(served.port, ["utf-8", "utf-16"])
    try:
        for client, encoding in ((utf16, "utf-16-le"), (utf8, "utf-8")):
            width = 2 if encoding == "utf-16-le" else 1
            col = len(f"    {line}".encode(encoding)) // width
            open_doc(client, "file:///tcp/main.py", text)
            result = await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier("file:///tcp/main.py"),
                    position=types.Position(1, col),
                )
            )
            [item] = result.items  # type: ignore[union-attr]
            assert item.text_edit.range.start == types.Position(1, col - len("greet")), encoding  # type: ignore[union-attr]
            assert item.text_edit.range.end == types.Position(1, col)  # type: ignore[union-attr]
        assert (await status(utf16))["position_encoding"] == "utf-16"
        assert (await status(utf8))["position_encoding"] == "utf-8"
    finally:
        await _close(utf16)
    # One client leaving (shutdown + exit) does not stop the server for the other.
    st = await status(utf8)
    assert st["model"]["state"] == "ready" and st["documents"] == 1
    # The status names the CPU path the engine runs on, as the probe decided it.
    assert st["model"]["cpu_path"]["path"] in ("full", "no-amx", "plain")
    assert st["model"]["cpu_path"]["summary"].startswith(st["model"]["cpu_path"]["path"])
    await _close(utf8)


async def test_http_api_runs_in_the_same_process(served: Served) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served.http_port}", timeout=30) as http:
        response = await http.get("/")
        health = await http.get("/health")
    assert response.status_code == 200 and "fimble" in response.text
    assert health.status_code == 200 and health.json()["cpu_path"] in ("full", "no-amx", "plain")


# The next line copies the pattern of the ones above it: prompt lookup drafts most of it.
_DRAFTED = "".join(f"    parser.add_argument('--level-{i}', type=int, default={i})\n" for i in range(6))
_DRAFTED += "    \n"


async def test_one_clients_settings_leave_the_other_clients_requests_alone(served: Served) -> None:
    """Settings are per connection: one editor turning speculative decoding off does not turn it
    off for another editor on the same model (it used to be written into the shared engine)."""
    quiet = await _connect(served.port, ["utf-16"])
    other = await _connect(served.port, ["utf-16"])
    try:
        quiet.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimble": {"speculative": False}})
        )
        for _ in range(100):
            if (await status(quiet))["settings"].get("speculative") is False:
                break
            await asyncio.sleep(0.02)
        drafted = {}
        for client, name in ((quiet, "quiet"), (other, "other")):
            uri = f"file:///tcp/{name}.py"
            open_doc(client, uri, _DRAFTED)
            await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier(uri), position=types.Position(6, 4)
                )
            )
            engine = (await status(client))["last"]["engine"]
            assert engine["tokens_generated"] > 0, (name, engine)
            drafted[name] = engine["drafted"]
        assert drafted["quiet"] == 0 and drafted["other"] > 0, drafted
        assert (await status(other))["settings"].get("speculative") is True
    finally:
        await _close(quiet)
        await _close(other)
