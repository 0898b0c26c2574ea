"""Report: summaries per setting and line group, the context effect, recommendation, JSON + HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fimble.evaluation.report import build_report, recommend, render_html, write_report


def row(model: str, context: bool, cross: bool, exact: bool, ms: float, **kw: Any) -> dict[str, Any]:
    base = {
        "id": f"a.py:{int(ms)}:1",
        "path": "a.py",
        "line": 1,
        "column": 0,
        "kind": "line_start",
        "cross_file": cross,
        "cross_file_names": ["Thing"] if cross else [],
        "model": model,
        "context": context,
        "truth": "x = Thing()",
        "prediction": "x = Thing()" if exact else "x = <y>",
        "exact": exact,
        "edit_similarity": 1.0 if exact else 0.6,
        "identifier_exact": exact,
        "identifier_f1": 1.0 if exact else 0.5,
        "latency_ms": ms,
        "context_ms": 1.0,
        "prompt_ms": ms / 2,
        "generation_ms": ms / 2,
        "prompt_tokens": 800,
        "tokens_evaluated": 100,
        "tokens_reused": 700,
        "tokens_generated": 5,
        "context_tokens": 300 if context else 0,
        "stop_reason": "newline",
        "chunks": [{"path": "b.py", "reason": "defines Thing", "tokens": 300}] if context else [],
    }
    return {**base, **kw}


A, B = "a.py:1:1", "a.py:2:1"  # (a line's id pairs its answers without and with context)
ROWS = [
    row("small", False, True, False, 500, id=A),
    row("small", False, False, True, 600, id=B),
    row("small", True, True, True, 900, id=A),
    row("small", True, False, True, 1000, id=B),
    row("big", False, True, False, 3000, id=A),
    row("big", True, True, True, 4000, id=A),
]


def test_summaries_and_context_effect() -> None:
    report = build_report(ROWS, {"source": "test"})
    s = report["summaries"]
    assert list(s) == ["small · no context", "small · context", "big · no context", "big · context"]
    assert s["small · context"]["groups"]["cross_file"]["exact_match"] == 1.0
    assert s["small · no context"]["groups"]["other"]["n"] == 1
    assert s["big · no context"]["groups"]["other"]["n"] == 0
    effect = report["context_effect"]["small"]
    cross = effect["cross_file"]
    assert (cross["without"], cross["with"], cross["relative_change"]) == (0.0, 1.0, None)
    assert (cross["won"], cross["lost"]) == (1, 0)
    assert effect["other"]["relative_change"] == 0.0 and effect["other"]["won"] == 0


def test_cross_file_lines_whose_names_the_file_has_not_shown_are_their_own_group() -> None:
    rows = [
        row("m", False, True, True, 500),
        row("m", True, True, True, 500),
        row("m", False, True, False, 600, cross_file_unseen=["Thing"]),
        row("m", True, True, True, 600, cross_file_unseen=["Thing"]),
    ]
    report = build_report(rows, {"source": "test"})
    groups = report["summaries"]["m · context"]["groups"]
    assert groups["cross_file"]["n"] == 2 and groups["cross_file_unseen"]["n"] == 1
    effect = report["context_effect"]["m"]["cross_file_unseen"]
    assert (effect["n"], effect["without"], effect["with"], effect["relative_change"]) == (1, 0.0, 1.0, None)
    assert "not above: Thing" in render_html(report)


def test_the_context_effect_pairs_the_same_lines_and_says_how_sure_it_is() -> None:
    rows = []
    for i in range(20):  # 10 lines right both ways, 8 won by context, 2 lost, 0 right neither way
        off, on = (True, True) if i < 10 else (False, True) if i < 18 else (True, False)
        line = f"a.py:{i}:1"
        rows += [row("m", False, True, off, 500, id=line), row("m", True, True, on, 600, id=line)]
    rows.append(row("m", True, True, True, 700, id="only-with-context.py:1:1"))  # (an interrupted run)
    effect = build_report(rows, {})["context_effect"]["m"]["cross_file"]
    assert (effect["n"], effect["won"], effect["lost"]) == (20, 8, 2)
    assert effect["relative_change"] == 0.5  # 12 -> 18 of 20
    assert effect["p_value"] == 0.109  # 2 * P(X <= 2), X ~ Binomial(10, 1/2)
    lo, hi = effect["interval"]
    assert lo < 0.5 < hi
    page = render_html(build_report(rows, {}))
    assert "Context effect" in page and "+50%" in page


def test_recommendation_prefers_best_setting_within_the_latency_target() -> None:
    report = build_report(ROWS, {})
    rec = report["recommendation"]
    assert rec["model"] == "small" and rec["context"] is True
    assert rec["prompt_tokens_per_s"] > 0 and "small" in rec["text"]
    slow = recommend(ROWS, report["summaries"], target_ms=100)
    assert slow["condition"] == "small · no context" and "fastest" in slow["text"]


def test_recommendation_judges_latency_as_typing_sees_it_not_the_cold_prompt() -> None:
    # Context makes the whole prompt slow to evaluate (a cold region), but the server warms it while
    # the user is idle: per suggestion, typing pays the generation, which context barely changes.
    rows = [
        row("m", False, True, False, 2500, prompt_ms=2200, generation_ms=300),
        row("m", True, True, True, 9000, prompt_ms=8650, generation_ms=330, prompt_tokens=1500),
    ]
    rec = recommend(rows, build_report(rows, {})["summaries"])
    assert rec["context"] is True
    assert rec["typing_latency_p50_ms"]["m · context"] < 1000
    assert rec["warmup_s"] > 0 and rec["context_budget_tokens"] >= 0
    assert "warm up" in rec["text"]


def test_html_is_self_contained_and_escaped(tmp_path: Path) -> None:
    rows = [*ROWS, row("small", True, False, False, 700, truth="if a < b and '<script>':")]
    report = build_report(rows, {"source": "requests==2.32.3", "models": ["small", "big"]})
    page = render_html(report)
    assert page.count("<svg") == 5 and "<script>" not in page and "&lt;script&gt;" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    json_path, html_path = write_report(report, tmp_path / "out")
    assert json.loads(json_path.read_text())["summaries"].keys() == report["summaries"].keys()
    assert html_path.read_text().startswith("<!doctype html>")
