"""What an HTTP client can name as a file: nothing outside the workspace folders, and no secret.

Clients name their file in the prompt (Qwen's ``<|file_sep|>path``, Continue's ``Path:`` comments,
llama.cpp's ``input_extra`` file names). fimble looks that path up in its index for repository
context, so a ``..`` or an absolute path elsewhere must find nothing and open nothing; and a prompt for
a file on the secrets list (``.env``) is refused with 403. Real index, scripted engine.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fimble.server.index_runner import IndexRunner
from fimble.server.workspace_roots import WorkspaceIndexes
from tests.server.http.conftest import FakeEngine

OUTSIDE = "zqOUTSIDE5521"
_opened: list[str] | None = None  # the audit hook records while a test sets this


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def opened() -> Iterator[list[str]]:
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, IndexRunner]]:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "app.py").write_text("def helper():\n    return 1\n")
    (outside / "private.py").write_text(f"def outside_secret():\n    return '{OUTSIDE}'\n")
    indexes = WorkspaceIndexes(watch=False)
    indexes.configure([ws], [])
    deadline = time.monotonic() + 60
    while not all(i.get("ready") for i in indexes.stats()["indexes"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    runner = IndexRunner(indexes)
    yield ws, outside, runner
    runner.close()


def _names(ws: Path, outside: Path) -> list[str]:
    target = outside / "private.py"
    return ["../outside/private.py", str(target), f"{ws}/../outside/private.py", "../" * 12 + str(target)[1:],
            "..\\outside\\private.py", f"file://{target}"]  # fmt: skip


def test_no_path_in_a_prompt_reaches_outside_the_workspace(
    serve: Any, workspace: tuple[Path, Path, IndexRunner], opened: list[str]
) -> None:
    ws, outside, runner = workspace
    engine = FakeEngine(reply="x = 1")
    served = serve(engine=engine, index=runner)
    prefix, fim = "def f():\n    return outside_", "<|fim_prefix|>a<|fim_suffix|><|fim_middle|>"
    with served.client() as client:
        for name in _names(ws, outside):
            bodies = [
                ("/v1/completions", {"prompt": f"<|repo_name|>ws\n<|file_sep|>{name}\n{fim}"}),
                ("/v1/completions", {"prompt": f"# Path: {name}\n# x = 1\n# {name}\n{prefix}",
                                     "suffix": "\n"}),
                ("/infill", {"input_prefix": prefix, "input_suffix": "\n",
                             "input_extra": [{"filename": name, "text": "y = 2\n"}]}),
                ("/api/generate", {"model": "x", "prompt": f"<|file_sep|>{name}\n{fim}", "raw": True,
                                   "stream": False}),
            ]  # fmt: skip
            for route, body in bodies:
                answer = client.post(route, json=body)
                assert answer.status_code == 200, (route, name, answer.text)
    assert engine.prompts and not [p for p in engine.prompts if OUTSIDE in p]
    assert not [p for p in opened if p.startswith(str(outside))]


@pytest.mark.parametrize("name", [".env", "config/.env.production", "keys/server.pem", "credentials.json"])
def test_a_prompt_for_a_secret_file_is_refused(
    serve: Any, workspace: tuple[Path, Path, IndexRunner], name: str
) -> None:
    _, _, runner = workspace
    engine = FakeEngine()
    served = serve(engine=engine, index=runner)
    with served.client() as client:
        answer = client.post("/v1/completions", json={
            "prompt": f"<|file_sep|>{name}\n<|fim_prefix|>API_TOKEN=<|fim_suffix|><|fim_middle|>"
        })  # fmt: skip
    assert answer.status_code == 403 and answer.json()["error"]["type"] == "secret_file"
    assert engine.prompts == []
