"""A cursor's repository context gathered from a real index (tree-sitter, LMDB) of files on disk."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from fimble.completion.context.gather import ContextChunk, gather_context
from fimble.indexer import IndexConfig, WorkspaceIndex


def gather_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Mapping[str, str], path: str, line: int
) -> list[ContextChunk]:
    """Write ``files`` (workspace path -> text) under ``tmp_path/ws``, index them, and gather the
    context at 0-based ``line`` of ``path`` as the server would (its text from ``files``)."""
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    root = tmp_path / "ws"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    with WorkspaceIndex.open(root, IndexConfig(workers=0)) as index:
        index.build()
        return gather_context(index, path, files[path], line)
