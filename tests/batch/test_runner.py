"""`run_batch` on a model-free engine: records, errors, grouping and resuming."""

from __future__ import annotations

import json
from pathlib import Path

from fimble.batch import Journal, parse_items, run_batch
from fimble.batch.items import BatchItem
from fimble.batch.runner import _same_files_together
from tests.batch.fake import BatchEchoEngine, EchoEngine, answer_for

REQUESTS = [
    {"id": "a", "prompt": "one two"},
    {"id": "b", "prompt": "three four five", "stop": ["four"]},
    "oops",
    {"id": "c", "prompt": "six", "max_tokens": 2},
    {"id": "d", "prompt": "seven eight"},
]


def inputs() -> list[str]:
    return [r if isinstance(r, str) else json.dumps(r) for r in REQUESTS]


def by_id(path: Path) -> dict[str, dict[str, object]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_every_line_gets_a_record(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    engine = EchoEngine()
    with Journal(out) as journal:
        summary = run_batch(engine, parse_items(inputs()), journal, width=2)  # type: ignore[arg-type]
    got = by_id(out)
    assert set(got) == {"a", "b", "c", "d", "line:3"}
    assert got["a"]["text"] == answer_for("one two") and got["a"]["stop_reason"] == "eog"
    assert got["b"]["text"] == "five " and got["b"]["stop_reason"] == "stop_string"
    assert got["c"]["text"] == "si" and got["c"]["stop_reason"] == "max_tokens"
    assert "error" in got["line:3"]
    assert (summary.total, summary.done, summary.errors, summary.skipped) == (5, 4, 1, 0)


def test_a_rerun_does_only_what_is_left(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with Journal(out) as journal:
        run_batch(EchoEngine(), list(parse_items(inputs()))[:2], journal)  # type: ignore[arg-type]
    engine = EchoEngine()
    with Journal(out) as journal:
        summary = run_batch(engine, parse_items(inputs()), journal, width=3)  # type: ignore[arg-type]
    assert engine.calls == ["six", "seven eight"]
    assert (summary.skipped, summary.done, summary.errors) == (2, 2, 1)
    assert len(out.read_text().splitlines()) == 5


def test_width_does_not_change_what_is_answered(tmp_path: Path) -> None:
    texts = []
    for width in (1, 2, 4):
        out = tmp_path / f"out{width}.jsonl"
        progress: list[tuple[int, int]] = []
        with Journal(out) as journal:
            run_batch(
                EchoEngine(),  # type: ignore[arg-type]
                parse_items(inputs()),
                journal,
                width=width,
                on_progress=lambda done, total, seen=progress: seen.append((done, total)),
            )
        texts.append({k: v.get("text") for k, v in by_id(out).items()})
        assert progress[-1] == (5, 5)
    assert texts[0] == texts[1] == texts[2]


def test_a_group_decoded_together_ends_each_request_as_alone(tmp_path: Path) -> None:
    """The group is decoded together to its largest max_tokens, each request with its own stop strings,
    stop rules and max_tokens checked after every token, as decoding it alone does."""
    alone, together = tmp_path / "alone.jsonl", tmp_path / "together.jsonl"
    with Journal(alone) as journal:
        run_batch(EchoEngine(), parse_items(inputs()), journal, width=1)  # type: ignore[arg-type]
    engine = BatchEchoEngine()
    with Journal(together) as journal:
        run_batch(engine, parse_items(inputs()), journal, width=4)  # type: ignore[arg-type]
    assert engine.batches == [4] and engine.calls == []  # the four good requests in one batch
    strip = lambda r: {k: v for k, v in r.items() if k != "timings"}  # noqa: E731
    assert {k: strip(v) for k, v in by_id(together).items()} == {k: strip(v) for k, v in by_id(alone).items()}


def test_a_wide_run_hands_the_engine_several_groups_and_journals_a_group_at_a_time(tmp_path: Path) -> None:
    """Width 2, four good requests: one ``generate_batch`` of all four (the engine refills the slot of
    a request that stopped), their records committed two at a time as they finish."""
    engine = BatchEchoEngine()
    progress: list[tuple[int, int]] = []
    with Journal(tmp_path / "out.jsonl") as journal:
        summary = run_batch(
            engine,  # type: ignore[arg-type]
            parse_items(inputs()),
            journal,
            width=2,
            on_progress=lambda done, total: progress.append((done, total)),
        )
    assert engine.batches == [4]
    assert progress == [(1, 5), (3, 5), (5, 5)]  # the bad line first, then two records at a time
    assert summary.tokens_evaluated == summary.prompt_tokens and summary.tokens_reused == 0


def test_items_of_one_file_are_decoded_side_by_side() -> None:
    """Their shared head is evaluated once only when they run together: a file's items move up to
    its first one; plain prompts (no file) keep their places."""
    lines = [
        json.dumps({"id": "a1", "prefix": "x", "path": "a.py"}),
        json.dumps({"id": "p", "prompt": "plain"}),
        json.dumps({"id": "b1", "prefix": "y", "path": "b.py"}),
        json.dumps({"id": "a2", "prefix": "xx", "path": "a.py"}),
        json.dumps({"id": "b2", "prefix": "yy", "path": "b.py"}),
    ]
    items = [i for i in parse_items(lines) if isinstance(i, BatchItem)]
    assert [i.id for i in _same_files_together(items)] == ["a1", "a2", "p", "b1", "b2"]
