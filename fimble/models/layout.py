"""Where each model's files live in the cache, and what a cached file must match.

Shared by ``store`` (which writes the cache) and ``catalog`` (which only looks at it).
Layout under ``paths.models_root()``::

    NAME.gguf               a complete, hash-checked model (only ever created by os.replace)
    NAME.gguf.verified      JSON proof of the last full sha256 check (see integrity.py)
    .partial/NAME/          an unfinished pull: model.gguf.part + state.json (resumable)
    .locks/NAME.lock        held while a pull, import or rm of NAME runs
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from fimble import paths
from fimble.errors import InputError
from fimble.models import registry
from fimble.models.integrity import Verified
from fimble.models.locking import model_lock
from fimble.models.registry import ModelSpec

__all__ = [
    "Notify",
    "check_name",
    "expected",
    "is_path_like",
    "lock",
    "model_path",
    "models_dir",
    "partial_dir",
    "spec_or_none",
]

_log = logging.getLogger("fimble.models")
Notify = Callable[[str], None]


def models_dir() -> Path:
    return paths.models_root()


def check_name(name: str) -> str:
    if not registry.is_valid_name(name):
        raise InputError(f"{name!r} is not a valid model name: use letters, digits, '.', '_' and '-'")
    return name


def model_path(name: str) -> Path:
    """Where model ``name`` lives in the cache (whether or not it is there)."""
    return models_dir() / f"{check_name(name)}.gguf"


def partial_dir(name: str) -> Path:
    return models_dir() / ".partial" / check_name(name)


def lock(name: str, notify: Notify | None = None) -> AbstractContextManager[None]:
    """The per-model lock; ``notify`` hears once that we are waiting for another process."""

    def on_wait() -> None:
        (notify or _log.warning)(f"waiting for another fimble process working on model {name}")

    return model_lock(models_dir() / ".locks" / f"{check_name(name)}.lock", on_wait=on_wait)


def is_path_like(name_or_path: str | os.PathLike[str]) -> bool:
    """A ``Path``, or a string with a path separator or ending in ``.gguf``, names a file."""
    if isinstance(name_or_path, os.PathLike):
        return True
    s = str(name_or_path)
    return s.endswith(".gguf") or "/" in s or os.sep in s


def spec_or_none(name: str) -> ModelSpec | None:
    return registry.get(name) if name in registry.names() else None


def expected(spec: ModelSpec | None, rec: Verified | None) -> tuple[int | None, str | None]:
    """Size and sha256 a cached file must have.

    The registry's, except for an imported model (or a hub file that is not byte-identical to the
    PyPI parts), whose only reference is the hash recorded when it was stored.
    """
    hub_own_file = spec is not None and spec.hf is not None and not spec.hf.same_file
    if spec is None or (hub_own_file and rec is not None and rec.source.startswith("hf:")):
        return None, rec.sha256 if rec else None
    return spec.size, spec.sha256
