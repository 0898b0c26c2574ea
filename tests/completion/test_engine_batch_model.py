"""Several slots on one model: prompts decoded together give each prompt's greedy output alone."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fimble.completion.context.imports import ImportChoices
from fimble.completion.engine import BatchGeneration, Engine, EngineConfig, Generation
from fimble.completion.engine.batch import MIN_HEAD
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.guide import ImportGuide
from fimble.completion.prompt.fim import build_prompt
from fimble.errors import EngineError
from tests.model_paths import SMALL, model_path

pytestmark = pytest.mark.model

EXAMPLE = Path(__file__).parents[2] / "fimble" / "examples" / "dates.py"
# A source file long enough for its lines' prompts to share a head of a few hundred tokens.
LONG_FILE = Path(__file__).parents[2] / "fimble" / "completion" / "engine" / "kvplan.py"


@pytest.fixture(scope="module")
def small() -> Iterator[Engine]:
    engine = Engine(model_path(SMALL), EngineConfig(n_ctx=4096, n_seq_max=4))
    yield engine
    engine.close()


def fim_prompt(engine: Engine, prefix: str, suffix: str) -> list[int]:
    return build_prompt(engine.tokenize, engine.fim, prefix, suffix).tokens


def prompts(engine: Engine) -> list[list[int]]:
    text = EXAMPLE.read_text()
    return [
        fim_prompt(engine, "def add(a, b):\n    return ", "\n\n\nprint(add(1, 2))\n"),
        fim_prompt(engine, text.split("dates.append(")[0] + "dates.append(", ")\n    return dates\n"),
        fim_prompt(engine, "import os\n\ndef list_python_files(root):\n    ", "\n"),
    ]


def alone(engine: Engine, prompt: list[int], max_tokens: int) -> Generation:
    engine.reset()
    return engine.generate(prompt, max_tokens=max_tokens, speculative=False)


def assert_same_until_a_near_tie(batched: BatchGeneration, single: Generation) -> None:
    """Equal, or equal up to a token the batch chose by a near-tie (another batch shape's rounding
    may choose the runner-up there), after which the two decodings may part."""
    if batched.tokens == single.tokens:
        assert batched.text == single.text and batched.stop_reason == single.stop_reason
        return
    first = next(
        (i for i, (a, b) in enumerate(zip(batched.tokens, single.tokens, strict=False)) if a != b),
        min(len(batched.tokens), len(single.tokens)),
    )
    assert batched.near_ties and batched.near_ties[0] <= first, (first, batched, single)


def test_two_prompts_in_one_batch_give_each_prompt_s_greedy_output(
    small: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    two = prompts(small)[:2]
    expected = [alone(small, p, 24) for p in two]
    small.reset()
    with caplog.at_level(logging.DEBUG, logger="fimble.completion.engine"):
        got = small.generate_batch(two, max_tokens=24)
    assert len(got) == 2
    for batched, single, prompt in zip(got, expected, two, strict=True):
        assert batched.prompt_tokens == batched.tokens_evaluated == len(prompt)
        assert batched.tokens, batched
        assert_same_until_a_near_tie(batched, single)
    logged = sum("near-tie" in r.getMessage() for r in caplog.records)
    assert logged == sum(len(g.near_ties) for g in got)


def test_each_prompt_stops_by_its_own_rule(small: Engine) -> None:
    """Per-prompt stop checks (``stops``): one request stops after its first token while the other
    goes on to max_tokens (wave sizes 2 and 4: across waves the checks stay with their prompts)."""
    p1, p2, p3 = prompts(small)
    first = lambda text: ("first", len(text)) if text else None  # noqa: E731
    small.reset()
    got = small.generate_batch([p1, p2, p3, p1], max_tokens=8, stops=[first, None, None, first])
    assert got[0].stop_reason == "first" and len(got[0].tokens) == 1
    assert got[3].stop_reason == "first" and len(got[3].tokens) == 1
    assert all(len(g.tokens) > 1 or g.stop_reason == "eog" for g in got[1:3])
    with pytest.raises(ValueError):
        small.generate_batch([p1, p2], max_tokens=4, stops=[first])


def test_a_guided_import_line_in_a_batch_is_the_one_guided_alone(small: Engine) -> None:
    """An import line's guide picks its tokens from its own batch row, as it does alone: the forced
    guide holds the line to the one name the module gives, the ordinary one lets the model choose
    among the two; the unguided prompts beside them are unchanged."""
    typed = "from pkg.cache import "
    importing = fim_prompt(small, typed, "\n\n\nstore = Store()\nbucket = Bucket(store)\n")

    def guides() -> list[ImportGuide | None]:
        forced = ImportGuide(ImportChoices({"pkg.cache": ("Store",)}), typed, margin=float("inf"))
        return [forced, None, ImportGuide(ImportChoices({"pkg.cache": ("Bucket", "Store")}), typed), None]

    batch = [importing, prompts(small)[0], importing, prompts(small)[2]]
    expected = [
        alone(small, p, 12) if g is None else small.generate(p, max_tokens=12, guide=g, speculative=False)
        for p, g in zip(batch, guides(), strict=True)
    ]
    small.reset()
    got = small.generate_batch(batch, max_tokens=12, guides=guides())
    assert got[0].text.split("\n")[0].rstrip() == "Store" and got[0].guide == "kept"
    assert [g.guide for g in got] == [e.guide for e in expected]
    for batched, single in zip(got, expected, strict=True):
        assert_same_until_a_near_tie(batched, single)
    with pytest.raises(ValueError):
        small.generate_batch(batch, max_tokens=4, guides=[None])


def test_the_interactive_slot_keeps_serving_around_a_batch(small: Engine) -> None:
    """The batch uses other sequences: the editor's cache is untouched and the next keystroke's
    request reuses it exactly as if no batch had run."""
    p1, p2, p3 = prompts(small)
    small.reset()
    first = small.generate(p1, max_tokens=12, speculative=False)
    cached = small.cached_tokens
    batch = small.generate_batch([p2, p3, p2, p3], max_tokens=8)  # two waves of the three batch slots
    assert [g.stop_reason for g in batch] and len(batch) == 4
    assert batch[0].tokens == batch[2].tokens or batch[0].near_ties or batch[2].near_ties
    assert small.cached_tokens == cached
    again = small.generate(p1, max_tokens=12, speculative=False)
    assert again.tokens_evaluated == 1 and again.tokens_reused == len(p1) - 1
    assert again.text == first.text


def test_a_batch_that_needs_the_interactive_cells_clears_them_and_says_so() -> None:
    engine = Engine(model_path(SMALL), EngineConfig(n_ctx=512, n_seq_max=3))
    try:
        p1 = fim_prompt(engine, "def add(a, b):\n    return ", "\n")
        engine.generate(p1, max_tokens=4)
        held = len(engine.cached_tokens)
        lines = 1
        while len(long := engine.tokenize("x = 1\n" * lines)) + 16 <= engine.n_ctx - held:
            lines += 1
        assert len(long) + 16 < engine.n_ctx  # fits alone, not beside the interactive cells
        [gen] = engine.generate_batch([long], max_tokens=16)
        assert gen.tokens_evaluated == len(long) and gen.stop_reason != "cancelled"
        assert engine.cached_tokens == ()
        assert engine.generate(p1, max_tokens=4).tokens_evaluated == len(p1)
    finally:
        engine.close()


def test_batch_slots_are_needed_and_a_cancelled_batch_leaves_them_empty(small: Engine) -> None:
    p1, p2, _ = prompts(small)
    cancel = CancelToken()
    cancel.cancel("test")
    got = small.generate_batch([p1, p2], max_tokens=8, cancel=cancel)
    assert [g.stop_reason for g in got] == ["cancelled", "cancelled"]
    assert all(not s.cells for s in small.batch_slots)
    one = Engine(model_path(SMALL), EngineConfig(n_ctx=256))
    try:
        with pytest.raises(EngineError, match="n_seq_max"):
            one.generate_batch([p1], max_tokens=4)
    finally:
        one.close()


def test_lines_of_one_file_share_their_head_and_answer_as_each_alone(small: Engine) -> None:
    """Five cursor positions in one file (more prompts than the three batch slots, so freed slots
    are refilled): the file's start is evaluated once and copied, and every answer is the prompt's
    greedy answer alone, near-ties aside."""
    text = LONG_FILE.read_text()
    offsets = [m.end() for m in re.finditer(r"(?m)^ +(?=\S)", text)][4:34:6]  # indented lines
    prompts = [fim_prompt(small, text[:off], text[off:]) for off in offsets]
    expected = [alone(small, p, 16) for p in prompts]
    small.reset()
    got = small.generate_batch(prompts, max_tokens=16)
    reused = sorted(g.tokens_reused for g in got)
    assert reused[0] == 0 and all(r >= MIN_HEAD for r in reused[1:]), reused
    assert sum(g.tokens_evaluated for g in got) < sum(map(len, prompts)) - 4 * MIN_HEAD
    for batched, single, prompt in zip(got, expected, prompts, strict=True):
        assert batched.tokens_evaluated + batched.tokens_reused == len(prompt)
        assert_same_until_a_near_tie(batched, single)
    assert all(not s.cells for s in small.batch_slots)
