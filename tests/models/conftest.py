from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.models.helpers import FakeModel, make_fake_model, write_registry, write_wheels


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty FIMBLE_HOME; returns its models dir."""
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "models"


@dataclass
class FakeSetup:
    model: FakeModel
    wheels: Path
    registry: Path
    models_dir: Path

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def file(self) -> Path:
        return self.models_dir / f"{self.model.name}.gguf"


@pytest.fixture
def fake(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSetup:
    """A registry (via FIMBLE_REGISTRY) with one 3-part model whose wheels sit in a local dir."""
    model = make_fake_model()
    wheels = tmp_path / "wheels"
    write_wheels(model, wheels)
    registry = write_registry(tmp_path / "registry.toml", [model])
    monkeypatch.setenv("FIMBLE_REGISTRY", str(registry))
    return FakeSetup(model, wheels, registry, home)
