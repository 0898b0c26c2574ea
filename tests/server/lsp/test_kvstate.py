"""KV state on disk through the real server: after a restart, a known file's prompt is read back.

Two `fimble serve` processes in turn, one FIMBLE_HOME, the real 0.5B model. The first answers a
request in a real source file and, once idle, saves its prompt's KV state; the second, a fresh process,
answers its first request in that file evaluating only what changed since (a new line, the suffix).
"""

from __future__ import annotations

import asyncio
import shutil
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.server.lsp.conftest import (
    MODEL_OPTIONS,
    inline_params,
    open_doc,
    start_neovim_session,
    status,
    stop,
)

pytestmark = [pytest.mark.model, pytest.mark.asyncio]

SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"  # real code, on every machine
LINE = 300  # 0-based; the cursor goes after this line's indentation


def _cursor(text: str, line: int) -> tuple[int, int]:
    lines = text.split("\n")
    while not lines[line].strip():
        line += 1
    return line, len(lines[line]) - len(lines[line].lstrip())


async def _configure(client: LanguageClient, settings: dict[str, Any]) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimble": settings})
    )
    for _ in range(250):  # a notification has no reply: wait until status shows it applied
        if (await status(client))["settings"].get("first_suggestion_ms") == settings["firstSuggestionMs"]:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"settings not applied: {settings}")


async def _wait_saved(home: Path, timeout: float = 300.0) -> list[Path]:
    """Until a state file exists and nothing is being written (the server saves when idle)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        files = list((home / "kvstate").glob("*/*"))
        if any(f.suffix == ".kv" for f in files) and not any(".tmp" in f.name for f in files):
            return files
        await asyncio.sleep(0.2)
    raise AssertionError(f"no KV state saved under {home / 'kvstate'}")


async def test_a_restarted_server_reads_the_files_prompt_back(tmp_path: Path) -> None:
    root, home = tmp_path / "workspace", tmp_path / "home"
    root.mkdir()
    shutil.copy(SOURCE, root / "textwrap.py")
    text = (root / "textwrap.py").read_text()
    uri = (root / "textwrap.py").as_uri()
    options = {**MODEL_OPTIONS, "prefixTokens": 512, "suffixTokens": 64}

    first = await start_neovim_session(root, home)
    try:
        await _configure(first, {**options, "firstSuggestionMs": 0})  # the full prompt at once
        open_doc(first, uri, text)
        line, col = _cursor(text, LINE)
        await first.text_document_inline_completion_async(inline_params(uri, line, col))
        before = (await status(first))["last"]["engine"]
        assert before["prompt_tokens"] > 300
        saved = await _wait_saved(home)
    finally:
        await stop(first)
    assert saved

    second = await start_neovim_session(root, home)
    try:
        await _configure(second, {**options, "firstSuggestionMs": 5000})
        open_doc(second, uri, text)
        line2, col2 = _cursor(text, line + 1)  # the next line: not an answer the caches could hold
        await second.text_document_inline_completion_async(inline_params(uri, line2, col2))
        st = await status(second)
        after, model = st["last"]["engine"], st["model"]
    finally:
        await stop(second)
    assert after["prompt_tokens"] > 300
    assert after["tokens_evaluated"] < 150  # the new line, the suffix, the middle token
    assert after["tokens_reused"] >= after["prompt_tokens"] - 150
    assert model["tokens_restored"] > 300 and model["kv_states"] >= 1  # read back from disk
