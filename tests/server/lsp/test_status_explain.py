"""`fimble.status` explains the last request the way `fimble explain` does: the real server and the
real CLI, on the same file and cursor, with the real 0.5B model."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.server.lsp.conftest import (
    MODEL_OPTIONS,
    inline_params,
    insert_texts,
    model_path,
    open_doc,
    start_neovim_session,
    status,
    stop,
)

pytestmark = [pytest.mark.model, pytest.mark.asyncio(loop_scope="module")]

AREA = (
    "import math\n\n\n"
    "def area(radius):\n"
    "    return math.pi * radius ** 2\n\n\n"
    "def report(shapes):\n"
    "    for shape in shapes:\n"
    "        print(area())\n"
)
CALL = (9, len("        print(area("))
HEADER_DOC = "def perimeter(radius):\n"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("explain_ws")
    (root / "shapes.py").write_text(AREA)
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    c = await start_neovim_session(workspace, tmp_path_factory.mktemp("home"))
    yield c
    await stop(c)


def _cli_explain(path: Path, line: int, col: int, home: Path) -> dict[str, Any]:
    where = f"{path}:{line + 1}:{col + 1}"
    model = ["-m", model_path(), "-n", str(MODEL_OPTIONS["maxTokens"])]
    out = subprocess.run(
        [sys.executable, "-m", "fimble", "explain", where, "--json", *model],
        capture_output=True,
        text=True,
        env={**os.environ, "FIMBLE_HOME": str(home)},
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def test_status_explains_the_last_request_like_fimble_explain(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    path = workspace / "shapes.py"
    open_doc(client, path.as_uri(), AREA)
    result = await client.text_document_inline_completion_async(inline_params(path.as_uri(), *CALL))
    texts = insert_texts(result)
    explain = (await status(client))["last"]["explain"]

    # The parts with their reasons and token counts, the reuse and the timings, the shape, the stop.
    kinds = [p["kind"] for p in explain["parts"]]
    assert kinds[-3:] == ["prefix", "suffix", "middle"]
    assert all(p["tokens"] > 0 and p["reason"] for p in explain["parts"])
    assert explain["prompt_tokens"] == sum(p["tokens"] for p in explain["parts"])
    assert explain["tokens_evaluated"] + explain["tokens_reused"] == explain["prompt_tokens"]
    assert explain["prompt_ms"] > 0 and explain["tokens_generated"] >= 1
    assert explain["shape"] == "text after the cursor" and explain["multiline"] is False
    assert explain["stop_reason"]
    assert explain["lines"][0] == f"prompt: {explain['prompt_tokens']} tokens"
    stop_line = f"stop: {explain['stop_reason']}"
    assert any(line.startswith("prompt ") and stop_line in line for line in explain["lines"])

    # The CLI on the same file and cursor builds the same prompt and decides the same shape.
    cli = _cli_explain(path, *CALL, tmp_path / "cli-home")
    assert [(p["kind"], p["tokens"], p["reason"]) for p in cli["parts"]] == [
        (p["kind"], p["tokens"], p["reason"]) for p in explain["parts"]
    ]
    assert cli["shape"] == explain["shape"] and cli["multiline"] == explain["multiline"]
    assert texts == ([cli["completion"]] if cli["completion"].strip() else [])


async def test_status_says_why_a_block_was_asked_for(client: LanguageClient, workspace: Path) -> None:
    uri = (workspace / "perimeter.py").as_uri()
    open_doc(client, uri, HEADER_DOC)
    await client.text_document_inline_completion_async(inline_params(uri, 0, len(HEADER_DOC) - 1))
    explain = (await status(client))["last"]["explain"]
    assert explain["multiline"] is True and explain["shape"] == "block header"
    assert explain["lines"][-1] == "shape: multi-line (block header)"


async def test_multiline_setting_never_overrides_the_syntax(client: LanguageClient, workspace: Path) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimble": {"multiline": "never"}})
    )
    for _ in range(100):  # a notification has no reply: wait until status shows it
        if (await status(client))["settings"]["multiline"] == "never":
            break
        await asyncio.sleep(0.02)
    try:
        uri = (workspace / "never.py").as_uri()
        open_doc(client, uri, HEADER_DOC)
        result = await client.text_document_inline_completion_async(
            inline_params(uri, 0, len(HEADER_DOC) - 1)
        )
        explain = (await status(client))["last"]["explain"]
        assert explain["multiline"] is False and explain["shape"] == "never"
        assert all("\n" not in text.strip("\n") for text in insert_texts(result))
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimble": {"multiline": "auto"}})
        )
