"""Where fimble keeps its files: one root, overridable with FIMBLE_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["cache_root", "index_root", "models_root"]


def cache_root() -> Path:
    """The root of everything fimble stores; ``FIMBLE_HOME`` wins over the platform cache dir."""
    env = os.environ.get("FIMBLE_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("fimble"))


def models_root() -> Path:
    return cache_root() / "models"


def index_root() -> Path:
    return cache_root() / "index"
