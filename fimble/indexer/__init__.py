"""The workspace index: tree-sitter definitions, resolved imports and BM25 text windows in LMDB.

Public surface (the completion side imports only these)::

    WorkspaceIndex.open(root, config=None, *, writable=True)
        .build(rebuild=False, progress=None)      .start(watch=True)
        .update_buffer(path, text)  .update_file(path)  .remove_file(path)  .flush(timeout)
        .busy()  .pause()  .resume()  .close()
        .definitions(name, prefix=False, limit=50)   -> tuple[Definition, ...]
        .file_outline(path)                          -> tuple[Definition, ...]
        .imports_of(path)                            -> tuple[Import, ...]
        .symbols_near(path, line, radius=12)         -> SymbolsNear
        .search(text, k=5, exclude=(path, (l0, l1))) -> tuple[Snippet, ...]
        .stats()                                     -> IndexStats

Modules: ``walker``/``ignore`` find files, ``worker`` analyses one (``parse`` = tree-sitter with the
queries in ``queries/*.scm``, ``lexical`` = windows and terms), ``writer`` stores it in one transaction
(``store``/``records`` = LMDB layout), ``build`` runs a full pass, ``updater`` is the writer thread and
``watch`` feeds it; ``reader``/``resolve``/``bm25`` answer queries. Nothing here touches the network.

The names below are imported on first use: a parsing pool process imports ``fimble.indexer.worker``,
and with it this package, and needs none of the store and query modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fimble.indexer.config import IndexConfig
    from fimble.indexer.index import WorkspaceIndex
    from fimble.indexer.types import (
        Definition,
        Import,
        IndexStats,
        PassReport,
        Progress,
        Snippet,
        Span,
        SymbolsNear,
    )

__all__ = [
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

_HOME = {"IndexConfig": "config", "WorkspaceIndex": "index"}


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fimble.indexer.{_HOME.get(name, 'types')}"), name)
    globals()[name] = value
    return value
