"""KV state on disk with a real model: a fresh engine reads a saved prompt back instead of evaluating it."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from fimble.completion.engine import Engine, EngineConfig
from fimble.completion.engine.kvstore import KVStore
from fimble.completion.prompt.fim import build_prompt
from tests.model_paths import SMALL, model_path

pytestmark = pytest.mark.model

SOURCE = Path(textwrap.__file__)  # real code, the same on every machine running these tests


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[Engine, Engine]]:
    """Two engines on one model: the first plays the server before a restart, the second after it."""
    a = Engine(model_path(SMALL), EngineConfig(n_ctx=4096))
    b = Engine(model_path(SMALL), EngineConfig(n_ctx=4096))
    yield a, b
    a.close()
    b.close()


def _prompt(engine: Engine, cut: str = "    def _split(self, text):\n") -> tuple[list[int], int]:
    text = SOURCE.read_text()
    at = text.index(cut) + len(cut)
    prompt = build_prompt(
        engine.tokenize,
        engine.fim,
        text[:at],
        text[at:],
        path="textwrap.py",
        prefix_budget=600,
        suffix_budget=64,
    )
    head = prompt.stable_len + len(prompt.parts[[p.kind for p in prompt.parts].index("prefix")].tokens)
    return prompt.tokens, head


def test_a_fresh_engine_reads_the_saved_state_and_answers_the_same(
    engines: tuple[Engine, Engine], tmp_path: Path
) -> None:
    a, b = engines
    a.reset()
    b.reset()
    store = KVStore(tmp_path)
    a.attach_store(store)
    tokens, head = _prompt(a)
    first = a.generate(tokens, max_tokens=16)
    assert first.tokens_evaluated == len(tokens)
    assert a.save_state(head, wait=True)
    assert not a.save_state(head, wait=True)  # already saved: nothing written twice
    assert len(store.entries()) == 1 and store.entries()[0].n_tokens == head

    b.attach_store(KVStore(tmp_path))  # a restarted server scans the directory
    again = b.generate(tokens, max_tokens=16)
    assert b.tokens_restored == head
    assert again.tokens_evaluated == len(tokens) - head  # the suffix and middle token only
    assert again.tokens_evaluated < 80
    assert again.text == first.text and again.tokens == first.tokens


def test_switching_files_reads_the_other_file_back(engines: tuple[Engine, Engine], tmp_path: Path) -> None:
    a, _ = engines
    a.reset()
    store = KVStore(tmp_path)
    a.attach_store(store)
    one, head_one = _prompt(a)
    a.generate(one, max_tokens=4)
    a.save_state(head_one, wait=True)
    other = build_prompt(a.tokenize, a.fim, "import os\n\ndef main():\n    ", "\n", path="other.py").tokens
    a.generate(other, max_tokens=4)  # the cache now holds another file
    assert a.evaluation_cost(one) == len(one) - head_one
    back = a.generate(one, max_tokens=4)
    assert back.tokens_evaluated == len(one) - head_one
    assert back.tokens_reused == head_one


def test_an_unusable_state_is_dropped_and_the_prompt_evaluated(
    engines: tuple[Engine, Engine], tmp_path: Path
) -> None:
    a, _ = engines
    a.reset()
    store = KVStore(tmp_path)
    tokens, head = _prompt(a)
    store.save(tokens[:head], b"\0" * 4096)  # checksummed, but not a llama.cpp state
    a.attach_store(store)
    gen = a.generate(tokens, max_tokens=4)
    assert gen.tokens_evaluated == len(tokens)
    assert store.entries() == []
    a.attach_store(None)
