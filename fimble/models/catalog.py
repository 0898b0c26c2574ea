"""What is in the cache, for ``fimble models list`` and anyone who wants to show models.

Read-only and cheap: it trusts the ``.verified`` records and never hashes; the GGUF metadata read
is a few milliseconds per model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fimble.errors import ModelCorrupt
from fimble.models import layout, registry
from fimble.models.fetch import partial_bytes
from fimble.models.gguf import GGUFInfo, read_gguf
from fimble.models.integrity import read_verified
from fimble.models.registry import ModelSpec

__all__ = ["ModelStatus", "list_models", "status"]


@dataclass(frozen=True)
class ModelStatus:
    """One row of ``fimble models list``."""

    name: str
    path: Path
    spec: ModelSpec | None
    present: bool
    size: int | None
    state: str  # "verified", "unverified", "corrupt", "partial", "missing"
    partial_bytes: int = 0
    gguf: GGUFInfo | None = None
    error: str | None = None

    @property
    def is_default(self) -> bool:
        return self.name == registry.default_name()


def status(name: str, *, read_metadata: bool = True) -> ModelStatus:
    path = layout.model_path(name)
    spec = layout.spec_or_none(name)
    partial = partial_bytes(layout.partial_dir(name))
    if not path.is_file():
        return ModelStatus(name, path, spec, False, None, "partial" if partial else "missing", partial)
    st = path.stat()
    rec = read_verified(path)
    expected_size, expected_sha = layout.expected(spec, rec)
    if expected_size is not None and st.st_size != expected_size:
        state = "corrupt"
    elif rec is not None and rec.matches(st) and (expected_sha is None or rec.sha256 == expected_sha):
        state = "verified"
    else:
        state = "unverified"
    gguf = error = None
    if read_metadata:
        try:
            gguf = read_gguf(path)
        except ModelCorrupt as err:
            state, error = "corrupt", str(err)
    return ModelStatus(name, path, spec, True, st.st_size, state, partial, gguf, error)


def list_models(*, read_metadata: bool = True) -> list[ModelStatus]:
    """Registry models (present or not) followed by imported ones found in the cache."""
    known = registry.names()
    root = layout.models_dir()
    stems = (p.name.removesuffix(".gguf") for p in (root.glob("*.gguf") if root.is_dir() else []))
    imported = sorted(s for s in stems if s not in known and registry.is_valid_name(s))
    return [status(n, read_metadata=read_metadata) for n in [*known, *imported]]
