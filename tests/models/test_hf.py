from __future__ import annotations

import socket
import sys
import types
from pathlib import Path

import pytest

from fimble.errors import ModelFetchError
from fimble.models import registry, store
from fimble.models.hf import check_reachable, fetch_hf
from tests.models.conftest import FakeSetup


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """A stand-in huggingface_hub module recording download calls (the real one may be absent)."""
    calls: list[dict[str, object]] = []
    mod = types.ModuleType("huggingface_hub")
    mod.hf_hub_download = lambda **kw: calls.append(kw) or "/nonexistent"  # type: ignore[attr-defined]
    mod.utils = types.SimpleNamespace(disable_progress_bars=lambda: None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", mod)
    return calls


def test_missing_huggingface_hub_says_how_to_install(
    fake: FakeSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ModelFetchError, match=r"pip install 'fimble\[hf\]'"):
        store.pull(fake.name, source="hf", progress=False)
    assert not fake.file.exists()


def test_hf_hub_offline_env(fake: FakeSetup, fake_hub: list[object], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelFetchError, match="HF_HUB_OFFLINE"):
        fetch_hf(registry.get(fake.name), Path("/unused"))
    assert fake_hub == []


def test_unreachable_hub_fails_fast_with_offline_hint(
    fake: FakeSetup, fake_hub: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(
        ModelFetchError, match=r"cannot reach the Hugging Face hub.*fimble models pull tiny-test"
    ):
        store.pull(fake.name, source="hf", progress=False)
    assert fake_hub == [] and not fake.file.exists()


def test_reachable_hub_is_asked_for_the_registry_file(
    fake: FakeSetup, fake_hub: list[dict[str, object]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        fetch_hf(registry.get(fake.name), tmp_path / "dest", progress=False)
    assert fake_hub[0]["repo_id"] == "test/none" and fake_hub[0]["filename"] == "none.gguf"


def test_probe_gives_up_on_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    hang = threading.Event()
    monkeypatch.setattr(socket, "create_connection", lambda *_a, **_k: hang.wait(5))
    with pytest.raises(OSError, match="no answer"):
        check_reachable("https://example.invalid", timeout=0.1)
    hang.set()
