"""IndexConfig validation: one message naming the field."""

from __future__ import annotations

import pytest

from fimble.errors import ConfigError
from fimble.indexer import IndexConfig


def test_defaults() -> None:
    config = IndexConfig()
    assert config.max_file_bytes == 1 << 20 and config.workers == 2 and config.exclude == ()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_file_bytes": 0}, "max_file_bytes"),
        ({"workers": -1}, "workers"),
        ({"window_stride_lines": 0}, "window_stride_lines"),
        ({"map_bytes": 1 << 30, "max_map_bytes": 1 << 20}, "max_map_bytes"),
        ({"exclude": "vendor/"}, "exclude"),
        ({"deny": [1]}, "deny"),
    ],
)
def test_bad_values_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        IndexConfig(**kwargs)


def test_lists_become_tuples() -> None:
    assert IndexConfig(exclude=["a/", "b/"]).exclude == ("a/", "b/")  # type: ignore[arg-type]
