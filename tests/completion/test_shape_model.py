"""The shape decision and the stop rules on what the real 1.5B model writes (greedy, so repeatable).

Each test also runs the same prompt without stop rules, to show what the rule saved: the tokens the
model would have gone on writing, and the duplicate or the overrun they would have held.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fimble.completion.engine import Engine, EngineConfig
from fimble.completion.prompt.fim import build_prompt
from fimble.completion.service import CompletionRequest, CompletionResult, complete
from tests.model_paths import DEFAULT, model_path

pytestmark = pytest.mark.model

MAX = 48


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    eng = Engine(model_path(DEFAULT), EngineConfig(n_ctx=2048))
    yield eng
    eng.close()


def _run(engine: Engine, doc: str, path: str = "shapes.py") -> tuple[CompletionResult, str]:
    """The completion at ``|`` in ``doc``, and the raw text the model writes there with no stop rule."""
    offset = doc.index("|")
    text = doc.replace("|", "", 1)
    result = complete(engine, CompletionRequest(text=text, offset=offset, path=path, max_tokens=MAX))
    prompt = build_prompt(engine.tokenize, engine.fim, text[:offset], text[offset:], path=path)
    raw = engine.generate(prompt.tokens, max_tokens=MAX).text
    return result, raw


def test_block_header_gets_a_body_that_stops_before_the_next_definition(engine: Engine) -> None:
    doc = "import math\n\n\ndef area(radius):|\n\n\ndef perimeter(radius):\n    return 2 * math.pi * radius\n"
    result, raw = _run(engine, doc)
    assert result.multiline and result.shape == "block header"
    assert result.text.startswith("\n    ") and "def " not in result.text
    assert all(not line.strip() or line.startswith("    ") for line in result.text.split("\n"))
    # Unstopped, the model writes past the body (the next definition again, or more of the file).
    assert len(raw) > len(result.text)


def test_call_argument_does_not_duplicate_the_closing_paren(engine: Engine) -> None:
    doc = (
        "import datetime as dt\n\n\n"
        "def parse_dates(rows):\n"
        "    dates = []\n"
        "    for year, month, day in rows:\n"
        "        dates.append(|)\n"
        "    return dates\n"
    )
    result, _raw = _run(engine, doc)
    assert not result.multiline and result.shape == "text after the cursor"
    line = "        dates.append(" + result.text + ")"
    assert line.count("(") == line.count(")"), line
    assert result.text.startswith("dt.date")


def test_string_argument_does_not_duplicate_the_closing_quote(engine: Engine) -> None:
    doc = 'def check_age(age):\n    if age < 0:\n        raise ValueError("|")\n    return age\n'
    result, raw = _run(engine, doc)
    assert result.shape == "inside a string"
    assert result.text.strip() and '"' not in result.text, result.text
    # The model closes the string and the call itself (one token: ``")\n``) and then goes on.
    assert result.stop_reason == "stop_rule:quote_balance"
    assert raw.startswith(result.text + '")') and len(raw) > len(result.text) + 2


def test_body_stops_where_the_suffix_already_has_the_code(engine: Engine) -> None:
    doc = "def total(prices, tax):|\n    return subtotal * (1 + tax)\n"
    result, raw = _run(engine, doc)
    assert result.multiline
    assert "return subtotal" not in result.text
    assert result.stop_reason in ("stop_rule:suffix_repeat", "stop_rule:indent", "eog"), result.stop_reason
    assert "subtotal" in result.text
    assert raw.startswith(result.text) and "return subtotal" in raw  # unstopped, it duplicates the return


def test_mid_expression_is_one_line(engine: Engine) -> None:
    doc = "def scale(values, factor):\n    return [v * | for v in values]\n"
    result, _raw = _run(engine, doc)
    assert not result.multiline and "\n" not in result.text and result.text.strip()
