"""An indented line start with the real model: the prompt stops at the line's start, the model writes
the indentation and the suggestion starts at the cursor (``fimble.completion.prompt.heal``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fimble.completion.engine import Engine, EngineConfig
from fimble.completion.service import CompletionRequest, complete, plan
from tests.model_paths import DEFAULT, model_path

pytestmark = pytest.mark.model

DOC = (
    "def mean(values):\n"
    '    """The arithmetic mean of a non-empty list."""\n'
    "    total = sum(values)\n"
    "    |\n"
    "\n\n"
    "def spread(values):\n"
    "    return max(values) - min(values)\n"
)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    eng = Engine(model_path(DEFAULT), EngineConfig(n_ctx=2048))
    yield eng
    eng.close()


def _request() -> CompletionRequest:
    offset = DOC.index("|")
    return CompletionRequest(text=DOC.replace("|", "", 1), offset=offset, path="stats.py", max_tokens=32)


def test_the_prompt_stops_at_the_line_start_and_the_answer_starts_at_the_cursor(engine: Engine) -> None:
    planned = plan(engine, _request())
    assert planned.indent == "    "
    prefix = next(p for p in planned.prompt.parts if p.kind == "prefix")
    written = engine.detokenize(list(prefix.tokens[1:]))
    assert written.endswith("total = sum(values)\n")
    result = complete(engine, _request())
    assert result.text == "return total / len(values)"
    assert result.generation.text.startswith(result.text)  # what the front doors read: no indentation
