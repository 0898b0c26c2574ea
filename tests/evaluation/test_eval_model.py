"""`fimble eval --mode ceiling` end to end: a real sdist from PyPI (cached), the real index, the 0.5B
model (the served mode's real run is test_served_model.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.model_paths import SMALL, model_path

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_eval_writes_json_and_html_for_a_tiny_sdist(tmp_path: Path) -> None:
    gguf = model_path(SMALL)
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fimble",
            "eval",
            "--mode",
            "ceiling",
            "--pypi",
            "tomli==2.0.1",
            "--samples",
            "3",
            "--seed",
            "2",
            "--model",
            str(gguf),
            "--prefix-tokens",
            "256",
            "--max-tokens",
            "24",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((out / "eval.json").read_text())
    assert report["meta"]["samples"] == 3 and report["meta"]["source"] == "tomli==2.0.1"
    assert "served" not in report and not (out / "cases.jsonl").exists()
    rows = report["samples"]
    assert len(rows) == 6 and {r["context"] for r in rows} == {False, True}
    assert any(r["cross_file"] for r in rows)  # tomli's modules import each other
    assert all(set(r["cross_file_unseen"]) <= set(r["cross_file_names"]) for r in rows)
    for r in rows:
        assert r["truth"].strip() and r["tokens_evaluated"] >= 0 and r["prompt_tokens"] > 0
        if not r["context"]:
            assert r["chunks"] == []
    assert all(c["reason"] for r in rows for c in r["chunks"])
    kept = (out / "samples.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in kept] == [r["id"] for r in rows]
    page = (out / "eval.html").read_text()
    assert "<svg" in page and "Recommendation" in page and "Context effect" in page
    effect = next(iter(report["context_effect"].values()))["all"]
    assert effect["n"] == 3 and effect["won"] + effect["lost"] <= 3  # (the same 3 lines, paired)
    assert "exact" in done.stdout and "wrote" in done.stdout


SHAPES = """def rectangle_area(width, height):
    return width * height


def circle_area(radius):
    return 3.14159 * radius * radius


def square_area(side):
    return rectangle_area(side, side)
"""

APP = """from shapes import circle_area, rectangle_area, square_area


def house(width, height, radius):
    walls = rectangle_area(width, height)
    window = circle_area(radius)
    door = square_area(radius)
    return walls - window - door
"""


def test_the_ceiling_side_by_side_gives_the_answers_of_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--width 4`` decodes the lines in batch slots: every answer is the one decoded alone, except
    after a counted near-tie; the rows come in the same order."""
    from fimble.completion.engine import Engine, EngineConfig
    from fimble.evaluation.runner import EvalConfig, open_index, prepare, run_model
    from fimble.evaluation.sources import source_files

    gguf = model_path(SMALL)  # (before FIMBLE_HOME moves the model cache)
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    root = tmp_path / "repo"
    root.mkdir()
    (root / "shapes.py").write_text(SHAPES)
    (root / "app.py").write_text(APP)
    files = source_files(root)
    index = open_index(root)
    try:
        prepared = prepare(index, files, EvalConfig(samples=8, seed=1, cross_share=0.5))
    finally:
        index.close()
    engine = Engine(gguf, EngineConfig(n_ctx=8192, n_seq_max=6))
    try:
        alone = run_model(engine, SMALL, prepared, EvalConfig(max_tokens=24, width=1))
        batches: list[int] = []
        decode = engine.generate_batch
        spy = lambda prompts, **kw: batches.append(len(prompts)) or decode(prompts, **kw)  # noqa: E731
        monkeypatch.setattr(engine, "generate_batch", spy)
        together = run_model(engine, SMALL, prepared, EvalConfig(max_tokens=24, width=4))
    finally:
        engine.close()
    assert batches and sum(batches) == len(alone)  # every line, import lines with their guide
    assert len(prepared) >= 6 and len(together) == len(alone) == 2 * len(prepared)
    assert [(r["id"], r["context"]) for r in together] == [(r["id"], r["context"]) for r in alone]
    assert all("near_ties" in r for r in together) and not any("near_ties" in r for r in alone)
    pairs = list(zip(alone, together, strict=True))
    differ = [(a["prediction"], b["prediction"], b["near_ties"]) for a, b in pairs]
    differ = [d for d in differ if d[0] != d[1]]
    assert not [d for d in differ if not d[2]], differ
    assert len(differ) <= len(alone) // 4, differ  # near-ties are rare: most answers are the same
