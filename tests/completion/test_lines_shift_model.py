"""After a jump down a file, the real model's KV of the lines both prompts show is moved into place
(``Slot.plan``'s lines reuse): far fewer tokens are evaluated, and the answer is the one a cold cache
gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fimble.completion.engine import Engine, EngineConfig
from fimble.completion.service import CompletionRequest, complete
from tests.model_paths import SMALL, model_path

pytestmark = pytest.mark.model

NAMES = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber", "basil", "cedar", "dune",
]  # fmt: skip


def _source() -> str:
    out = ['"""Conversions between units, one function each."""\n', "\n"]
    for i, name in enumerate(NAMES):
        out += [
            f"def {name}_to_base(value):\n",
            f"    scale = {i + 2}\n",
            "    return value * scale\n",
            "\n\n",
        ]
    return "".join(out)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    eng = Engine(model_path(SMALL), EngineConfig(n_ctx=4096))
    yield eng
    eng.close()


def _at(text: str, function: str) -> CompletionRequest:
    """The cursor at the start of ``function``'s ``return`` line, that line blanked."""
    start = text.index(f"def {function}_to_base")
    line = text.index("    return value * scale\n", start)
    masked = text[:line] + "    \n" + text[line + len("    return value * scale\n") :]
    return CompletionRequest(
        text=masked, offset=line + 4, path="units.py", max_tokens=16, prefix_budget=384, suffix_budget=64
    )


def test_a_jump_down_a_file_moves_the_lines_both_prompts_show(engine: Engine) -> None:
    text = _source()
    engine.reset()
    complete(engine, _at(text, "victor"))
    shifted = engine.tokens_shifted
    moved = complete(engine, _at(text, "zulu"))  # 20 lines down: the prefix starts lower
    assert engine.tokens_shifted - shifted > 64
    engine.reset()
    fresh = complete(engine, _at(text, "zulu"))
    assert moved.text == fresh.text == "return value * scale"
    assert moved.generation.tokens_reused > moved.generation.tokens_evaluated
    assert moved.generation.tokens_evaluated < fresh.generation.tokens_evaluated / 2
