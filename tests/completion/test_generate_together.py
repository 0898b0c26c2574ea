"""``service.generate_together``: many plans answered as ``generate`` answers each alone, all in
one engine batch (an import line with its guide), each alone on an engine without batch slots. The
real model's side-by-side equality is pinned in tests/evaluation/test_eval_model.py (the ceiling at
width 4 against width 1)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fimble.completion.context.imports import ImportChoices
from fimble.completion.engine import Generation
from fimble.completion.service import CompletionRequest, CompletionResult, generate, generate_together, plan
from tests.fakes import FakeEngine


@dataclass
class BatchingFake(FakeEngine):
    """A fake with batch slots whose ``generate_batch`` decodes each prompt as ``generate`` would,
    honouring its own stop check and limit, and reports each as done."""

    batch_slots: list[int] = field(default_factory=lambda: [2, 3])
    batches: list[int] = field(default_factory=list)
    guided: list[int] = field(default_factory=list)  # the batch rows that came with a guide

    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int,
        stops: Sequence[Callable[[str], Any]],
        limits: Sequence[int],
        on_done: Callable[[int, Generation], None],
        guides: Sequence[object],
    ) -> list[Generation]:
        self.batches.append(len(prompts))
        self.guided += [i for i, g in enumerate(guides) if g is not None]
        out = []
        for i, prompt in enumerate(prompts):
            assert limits[i] <= max_tokens
            out.append(self.generate(prompt, max_tokens=limits[i], stop=stops[i], guide=guides[i]))
            on_done(i, out[-1])
        return out


def _reply(prompt: str) -> str:
    if "def area" in prompt:
        return "width * height\n    more"
    if prompt.rstrip().endswith("<MID>") and "from shapes" in prompt:
        return "import circle_area\n"
    return "x + 1)\nnext"


def _requests() -> list[CompletionRequest]:
    choices = ImportChoices({"shapes": ("circle_area", "rectangle_area")}).as_snippet("app.py")
    return [
        CompletionRequest("def area(width, height):\n    return ", 36, path="a.py", max_tokens=20),
        CompletionRequest("print(f(", 8, path="b.py", max_tokens=3),
        CompletionRequest("from shapes ", 12, path="app.py", context_files=(choices,)),
        CompletionRequest("y = g(", 6, path="c.py"),
    ]


def _answers(engine: FakeEngine, batched: bool) -> dict[int, CompletionResult]:
    plans = [plan(engine, r) for r in _requests()]
    if not batched:
        return {i: generate(engine, p) for i, p in enumerate(plans)}
    got: dict[int, CompletionResult] = {}
    generate_together(engine, plans, got.__setitem__)
    return got


def test_the_plans_decode_in_one_batch_with_the_answers_alone_gives() -> None:
    alone = _answers(FakeEngine(reply_for=_reply), batched=False)
    engine = BatchingFake(reply_for=_reply)
    together = _answers(engine, batched=True)
    assert engine.batches == [4] and engine.guided == [2]  # the import line with its guide
    assert sorted(together) == [0, 1, 2, 3]
    for i in together:
        assert together[i].text == alone[i].text
        assert together[i].generation.stop_reason == alone[i].generation.stop_reason
    assert together[0].text == "width * height"
    assert together[1].generation.stop_reason == "max_tokens"  # its own limit (3), not the batch's


def test_an_engine_without_batch_slots_answers_each_alone() -> None:
    engine = BatchingFake(reply_for=_reply, batch_slots=[])
    together = _answers(engine, batched=True)
    assert engine.batches == [] and len(together) == 4
    assert [together[i].text for i in range(4)] == [
        a.text for _, a in sorted(_answers(FakeEngine(reply_for=_reply), batched=False).items())
    ]
