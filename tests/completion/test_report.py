"""The explanation `fimble explain` prints and `fimble.status` returns."""

from __future__ import annotations

from fimble.completion.engine import Generation
from fimble.completion.report import explanation, explanation_lines, timings_line
from fimble.completion.service import CompletionResult, PartSummary

GEN = Generation("x)", (1, 2), "stop_rule:bracket_balance", 120, 20, 100, 250.0, 80.0)
RESULT = CompletionResult(
    text="x",
    multiline=False,
    generation=GEN,
    parts=(
        PartSummary("repo", 3, "repository name"),
        PartSummary("context", 40, "imported: area", "shapes/geometry.py"),
        PartSummary("prefix", 60, "file before the cursor"),
        PartSummary("suffix", 16, "file after the cursor"),
        PartSummary("middle", 1, "generation starts here"),
    ),
    shape="text after the cursor",
)


def test_timings_line() -> None:
    assert timings_line(GEN) == (
        "prompt 120 tokens: 20 evaluated, 100 reused, 250 ms | generated 2 tokens in 80 ms (25.0 tok/s) "
        "| stop: stop_rule:bracket_balance"
    )


def test_timings_line_with_speculative_drafts() -> None:
    gen = Generation("abc", (1, 2, 3), "eog", 120, 20, 100, 250.0, 60.0, drafts=1, drafted=4, accepted=2)
    assert timings_line(gen).endswith("(50.0 tok/s, 2/4 drafted tokens accepted) | stop: eog")
    assert explanation(CompletionResult("abc", False, gen, ()))["accepted"] == 2


def test_lines_list_every_part_with_its_reason() -> None:
    lines = explanation_lines(RESULT)
    assert lines[0] == "prompt: 120 tokens"
    assert lines[2] == "  context      40  shapes/geometry.py  imported: area"
    assert lines[-2] == timings_line(GEN)
    assert lines[-1] == "shape: single line (text after the cursor)"


def test_explanation_as_data() -> None:
    info = explanation(RESULT)
    assert info["parts"][1] == {
        "kind": "context",
        "tokens": 40,
        "reason": "imported: area",
        "path": "shapes/geometry.py",
    }
    assert "path" not in info["parts"][0]
    assert (info["tokens_evaluated"], info["tokens_reused"], info["tokens_generated"]) == (20, 100, 2)
    assert info["stop_reason"] == "stop_rule:bracket_balance" and info["shape"] == "text after the cursor"
    assert info["lines"] == explanation_lines(RESULT)
