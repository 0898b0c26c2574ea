"""Every engine meets ``CompletionEngine``: the local one, the remote one and the tests' fake."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from fimble.completion.engine import CompletionEngine, Engine, EngineConfig
from fimble.completion.engine.remote import RemoteConfig, RemoteEngine
from tests.fakes import FakeEngine
from tests.model_paths import SMALL, model_path

_METHODS = ("tokenize", "detokenize", "reset", "generate", "close")
_DATA = ("model_path", "fim", "n_ctx", "load_ms", "tokens_shifted")


def _accepts(impl: Any, proto: Any) -> list[str]:
    """What keeps ``impl`` from being called as ``proto`` is called (empty: nothing)."""
    have = inspect.signature(impl).parameters
    want = inspect.signature(proto).parameters
    problems = [
        f"{name}: missing or of another kind"
        for name, p in want.items()
        if name not in have or have[name].kind != p.kind
    ]
    problems += [
        f"{name}: required, and the interface does not pass it"
        for name, p in have.items()
        if name not in want
        and p.default is inspect.Parameter.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return problems


def _sets(cls: type, name: str) -> bool:
    """``cls`` has ``name`` as a class attribute or field, or its ``__init__`` assigns it."""
    assigned = rf"self\.{name}\s*(:[^=]+)?="
    return name in dir(cls) or re.search(assigned, inspect.getsource(cls.__init__)) is not None


@pytest.mark.parametrize("cls", [Engine, RemoteEngine, FakeEngine])
def test_each_engine_has_the_interface_s_members_with_compatible_signatures(cls: type) -> None:
    for name in _METHODS:
        assert not _accepts(getattr(cls, name), getattr(CompletionEngine, name)), (cls, name)
    assert isinstance(inspect.getattr_static(cls, "cached_tokens"), property)
    for name in _DATA:
        assert _sets(cls, name), (cls, name)


def test_the_fake_is_a_completion_engine() -> None:
    fake = FakeEngine(reply="x + 1")
    assert isinstance(fake, CompletionEngine)
    engine: CompletionEngine = fake  # what a type checker checks, here asserted at run time too
    gen = engine.generate(engine.tokenize("ab"), max_tokens=3)
    assert (gen.text, gen.stop_reason, gen.tokens_evaluated) == ("x +", "max_tokens", 2)
    assert engine.cached_tokens == tuple(engine.tokenize("abx +"))
    again = engine.generate(engine.tokenize("abc"), max_tokens=1)
    assert (again.tokens_reused, again.tokens_evaluated) == (2, 1)
    engine.reset()
    assert engine.cached_tokens == ()


@pytest.mark.model
def test_the_local_and_remote_engines_are_completion_engines() -> None:
    remote = RemoteEngine(RemoteConfig(url="http://127.0.0.1:9"), model_path(SMALL))
    local = Engine(model_path(SMALL), EngineConfig(n_ctx=256))
    try:
        assert isinstance(remote, CompletionEngine)
        assert isinstance(local, CompletionEngine)
    finally:
        remote.close()
        local.close()
