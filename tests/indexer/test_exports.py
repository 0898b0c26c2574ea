"""The public surface the completion side imports: pinned so changes are deliberate."""

from __future__ import annotations

import dataclasses

import fimble.indexer as indexer
from fimble.indexer import types


def test_exported_members() -> None:
    assert sorted(indexer.__all__) == [
        "Definition",
        "Import",
        "IndexConfig",
        "IndexStats",
        "PassReport",
        "Progress",
        "Snippet",
        "Span",
        "SymbolsNear",
        "WorkspaceIndex",
    ]
    for name in indexer.__all__:
        assert getattr(indexer, name).__module__.startswith("fimble.indexer")


def test_value_types_are_frozen_dataclasses() -> None:
    for name in types.__all__:
        cls = getattr(types, name)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name


def test_query_api_names() -> None:
    for method in (
        "definitions",
        "file_outline",
        "imports_of",
        "symbols_near",
        "search",
        "stats",
        "update_buffer",
        "update_file",
        "remove_file",
        "build",
        "start",
        "flush",
        "busy",
        "pause",
        "resume",
        "close",
        "identifiers",
    ):
        assert callable(getattr(indexer.WorkspaceIndex, method)), method


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, fimble.indexer\n"
        "print(sorted(m for m in ('tree_sitter', 'numpy', 'watchdog') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # grammars, numpy and the watcher load only when used
