"""Indexer settings: one frozen dataclass, validated when built, every field defaulted."""

from __future__ import annotations

from dataclasses import dataclass, fields

from fimble.errors import ConfigError

__all__ = ["IndexConfig"]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """How the indexer walks, chunks and stores a workspace.

    ``exclude`` and ``deny`` take .gitignore-style patterns relative to the workspace root: ``exclude``
    adds to what is skipped, ``deny`` adds to the secrets that are never read whatever .gitignore says.
    ``workers`` processes parse in parallel during a full pass (0 or 1: parse in the writer thread),
    niced by ``worker_nice`` so that they yield the CPU to completions (the CLI, a foreground job the
    user waits for, passes 0).
    The store starts at ``map_bytes`` of address space and doubles on demand up to ``max_map_bytes``.
    """

    max_file_bytes: int = 1 * _MIB
    exclude: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    use_gitignore: bool = True
    window_stride_lines: int = 12
    window_block_bytes: int = 2048
    workers: int = 2
    worker_nice: int = 10
    pool_min_files: int = 48
    batch_files: int = 1024
    batch_bytes: int = 16 * _MIB
    batch_seconds: float = 2.0
    debounce_seconds: float = 0.3
    map_bytes: int = 256 * _MIB
    max_map_bytes: int = 64 * 1024 * _MIB

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if value < 0:
                raise ConfigError(f"index.{f.name} must not be negative (got {value})")
        if self.max_file_bytes < 1:
            raise ConfigError(f"index.max_file_bytes must be at least 1 (got {self.max_file_bytes})")
        if self.window_stride_lines < 1 or self.window_block_bytes < 64:
            raise ConfigError("index.window_stride_lines must be >= 1 and index.window_block_bytes >= 64")
        if self.map_bytes < _MIB or self.max_map_bytes < self.map_bytes:
            raise ConfigError("index.map_bytes must be >= 1 MiB and index.max_map_bytes >= index.map_bytes")
        for name in ("exclude", "deny"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(p, str) for p in value):
                raise ConfigError(f"index.{name} must be a list of patterns")
            object.__setattr__(self, name, tuple(value))
