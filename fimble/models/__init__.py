"""Offline model management: the registry, the local cache, GGUF metadata and ``doctor`` checks.

The rest of fimble (engine, LSP, HTTP) uses only what is re-exported here::

    from fimble.models import default_name, resolve, info

    path = resolve(name_or_path)      # Path to load; raises ModelNotFound / ModelCorrupt
    meta = info(name_or_path)         # GGUFInfo: architecture, context_length, fim.prefix ...

This package imports neither ``fimble.indexer`` nor ``fimble.completion``.
"""

from __future__ import annotations

from fimble.models.catalog import ModelStatus, list_models, status
from fimble.models.fim_tokens import FimTokens
from fimble.models.gguf import GGUFInfo, read_gguf
from fimble.models.layout import is_path_like, model_path
from fimble.models.registry import ModelSpec, default_name, get, names, specs
from fimble.models.store import VerifyResult, import_model, info, pull, remove, resolve, verify

__all__ = [
    "FimTokens",
    "GGUFInfo",
    "ModelSpec",
    "ModelStatus",
    "VerifyResult",
    "default_name",
    "get",
    "import_model",
    "info",
    "is_path_like",
    "list_models",
    "model_path",
    "names",
    "pull",
    "read_gguf",
    "remove",
    "resolve",
    "specs",
    "status",
    "verify",
]
