"""The llama.cpp engine, split by job (as llama.cpp's own server is):

- ``config``: ``EngineConfig``, ``Generation``, ``StopCheck`` and the like (value types, no llama.cpp);
- ``model``: the weights, vocabulary, FIM tokens, CPU path and the one llama.cpp context;
- ``slot``: one KV sequence, the tokens it holds, reuse plans, chunk parking, saved states;
- ``decoder``: ``llama_batch``es of one or several slots; greedy, guided and speculative steps;
- ``batch``: several prompts decoded together in batch slots, freed slots refilled as they stop;
- ``heads``: which batch prompts share a head (evaluated once, its KV cells copied), and cell counts;
- ``local``: ``Engine``, the model with its slots and decoder behind the methods fimble calls;
- ``api``: ``CompletionEngine``, the interface the completer needs of any engine (local or remote).

Everything importers used from the former ``fimble/completion/engine.py`` is re-exported here.
"""

from __future__ import annotations

from typing import Any

from fimble.completion.engine.api import CompletionEngine
from fimble.completion.engine.config import (
    TIE_MARGIN,
    BatchGeneration,
    EngineConfig,
    Generation,
    StopCheck,
    default_threads,
)
from fimble.completion.engine.local import Engine

# Private helpers tests reach for under their old names (``tests/completion/test_engine.py``).
from fimble.completion.engine.model import install_log_callback as _install_log_callback  # noqa: F401
from fimble.completion.engine.model import set_load_mode as _set_load_mode  # noqa: F401

__all__ = [
    "BatchGeneration",
    "CompletionEngine",
    "Engine",
    "EngineConfig",
    "Generation",
    "StopCheck",
    "default_threads",
]

_TIE_MARGIN = TIE_MARGIN


def __getattr__(name: str) -> Any:
    """``_log_callback`` is set once per process, after import: read it where it lives."""
    if name == "_log_callback":
        from fimble.completion.engine import model

        return model.log_callback()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
