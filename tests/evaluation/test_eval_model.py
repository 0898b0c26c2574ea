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
        [sys.executable, "-m", "fimble", "eval", "--mode", "ceiling", "--pypi", "tomli==2.0.1",
         "--samples", "3", "--seed", "2", "--model", str(gguf), "--prefix-tokens", "256",
         "--max-tokens", "24", "--out", str(out)],
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
