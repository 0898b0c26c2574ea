"""Where real-model tests find their GGUF files: the user's model cache, filled by `make models`.

Tests never download: a missing model fails with the command that fetches it, so a CI run that skipped
`make models` is loud rather than green-and-empty.
"""

from __future__ import annotations

from pathlib import Path

import pytest

__all__ = ["DEFAULT", "SMALL", "model_path"]

SMALL = "qwen2.5-coder-0.5b"
DEFAULT = "qwen2.5-coder-1.5b"


def model_path(name: str) -> Path:
    from fimble.errors import ModelError
    from fimble.models import store

    try:
        return store.resolve(name)
    except ModelError as err:
        pytest.fail(f"{err} (real-model tests need `make models`)")
