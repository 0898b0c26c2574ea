"""Fuzzing through the real protocol: hypothesis-generated LSP sessions against one ``fimble serve``
(stdio, the 0.5B model), each followed by a normal completion that must give the answer it gave
before any fuzzing (greedy decoding: the same input, the same suggestion).

Bounded here (``FIMBLE_FUZZ_SESSIONS``, default 12); ``make fuzz`` runs 200 and writes the counts
to ``bench/results/fuzz_lsp.json`` (``FIMBLE_FUZZ_REPORT``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.reliability.lsp_fuzz import StdioClient, run_session, sessions
from tests.server.lsp.conftest import env, model_path

pytestmark = pytest.mark.model

SESSIONS = int(os.environ.get("FIMBLE_FUZZ_SESSIONS", "12"))
GOOD = {
    "maxTokens": 12, "multiline": "auto", "contextTokens": 256, "enable": True, "languages": {},
    "debounceMs": 0, "deadlineMs": 120_000, "invokedDeadlineMs": 300_000, "prefixTokens": 1024,
    "suffixTokens": 256, "index": {"exclude": []},
    "completionFallback": "auto", "firstSuggestionMs": 1600, "kvStateMb": 1024, "speculative": True,
    "model": None, "noSuchSetting": None,
}  # fmt: skip
CHECK_DOC = "def area(width, height):\n    return "


class Server:
    def __init__(self, root: Path, home: Path, log: Any) -> None:
        self.root = root
        self.client = StdioClient(["-m", model_path()], env(home), log)
        self.checks = 0
        answer = self.client.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(),
            "workspaceFolders": [{"uri": root.as_uri(), "name": "ws"}],
            "capabilities": {"textDocument": {"inlineCompletion": {}}}, "initializationOptions": GOOD,
        })  # fmt: skip
        assert "result" in answer, answer
        self.client.notify("initialized", {})
        deadline = time.monotonic() + 900
        while self.status()["model"]["state"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.2)
        self.baseline = self.complete()
        assert self.baseline, "the check completion is empty: it would prove nothing"

    def status(self) -> dict[str, Any]:
        return self.client.request("workspace/executeCommand", {"command": "fimble.status"})["result"]

    def complete(self) -> str:
        """The check: reset the settings, open a fresh copy of one document, ask at its end."""
        self.client.notify("workspace/didChangeConfiguration", {"settings": {"fimble": GOOD}})
        self.checks += 1
        uri = (self.root / f"check{self.checks}.py").as_uri()
        self.client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": CHECK_DOC}})  # fmt: skip
        line = CHECK_DOC.count("\n")
        answer = self.client.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": len(CHECK_DOC.split("\n")[-1])},
            "context": {"triggerKind": 1}})  # fmt: skip
        self.client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        assert "result" in answer, answer
        items = answer["result"]["items"] if answer["result"] else []
        return items[0]["insertText"] if items else ""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "ws"
    root.mkdir()
    (root / "shapes.py").write_text("def perimeter(width, height):\n    return 2 * (width + height)\n")
    with open(base / "server.log", "wb") as log:
        srv = Server(root, base / "home", log)
        yield srv
        code = srv.client.close()
    report = os.environ.get("FIMBLE_FUZZ_REPORT")
    if report:
        counts = srv.client.counts
        Path(report).write_text(json.dumps({
            "sessions": counts.sessions, "messages": counts.messages, "requests": counts.requests,
            "errors_answered": counts.errors_answered, "steps": counts.by_kind,
            "checks_passed": srv.checks - 1,
            "crashes": 0, "hangs": 0, "exit_code": code,
        }, indent=2) + "\n")  # fmt: skip
    assert code == 0, (base / "server.log").read_text()[-4000:]


@settings(max_examples=SESSIONS, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(steps=sessions)
def test_fuzzed_sessions_leave_the_server_answering_as_before(server: Server, steps: list[Any]) -> None:
    client = server.client
    run_session(client, server.root, steps)
    client.counts.sessions += 1
    assert client.alive, "fimble serve died"
    assert server.complete() == server.baseline
