from __future__ import annotations

from pathlib import Path

import pytest

from fimble.models import catalog
from tests.models.conftest import FakeSetup
from tests.models.helpers import make_fake_model, write_registry


def test_list_includes_two_registry_models(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = make_fake_model("aa", n_parts=2, size=20000), make_fake_model("bb", n_parts=1, size=20000, seed=2)
    monkeypatch.setenv("FIMBLE_REGISTRY", str(write_registry(tmp_path / "r.toml", [a, b], default="bb")))
    rows = catalog.list_models()
    assert [r.name for r in rows] == ["aa", "bb"]
    assert [r.is_default for r in rows] == [False, True]


def test_status_of_a_garbage_file_is_corrupt(fake: FakeSetup) -> None:
    fake.models_dir.mkdir(parents=True)
    fake.file.write_bytes(b"x" * len(fake.model.data))
    row = catalog.status(fake.name)
    assert row.state == "corrupt" and row.error and "not a usable GGUF" in row.error
    assert row.present and row.size == len(fake.model.data)


def test_imported_files_are_listed_after_registry_models(fake: FakeSetup) -> None:
    fake.models_dir.mkdir(parents=True)
    (fake.models_dir / "zzz.gguf").write_bytes(fake.model.data)
    (fake.models_dir / "notes.txt").write_text("ignored")
    rows = catalog.list_models(read_metadata=False)
    assert [r.name for r in rows] == [fake.name, "zzz"]
    assert rows[1].state == "unverified" and rows[1].gguf is None
