"""Served summaries: Wilson intervals, groups and visits, the ceiling in the same table, pairing."""

from __future__ import annotations

from typing import Any

import pytest

from fimble.evaluation.served_report import (
    ceiling_summary,
    served_summary,
    stats,
    table,
    table_html,
    versus_ceiling,
    wilson,
)


def answer(visit: str, cross: bool, exact: bool, ms: float, **kw: Any) -> dict[str, Any]:
    base = {
        "mode": "served",
        "model": "m",
        "think_ms": 0,
        "request": "automatic",
        "case": f"a.py:{int(ms)}:1",
        "visit": visit,
        "cross_file": cross,
        "exact": exact,
        "edit_similarity": 1.0 if exact else 0.5,
        "empty": False,
        "latency_ms": ms,
        "small_first_prompt": visit == "cold",
        "ceiling_position": True,
        "server": {"tokens_evaluated": 10},
    }
    return {**base, **kw}


def test_wilson_interval() -> None:
    assert wilson(0, 0) is None
    lo, hi = wilson(5, 10)  # type: ignore[misc]
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 4)[0] == 0.0 and 0.4 < wilson(0, 4)[1] < 0.5  # type: ignore[index]
    assert wilson(4, 4)[1] == 1.0  # type: ignore[index]


def test_stats_of_answers() -> None:
    rows = [answer("cold", True, True, 100), answer("warm", False, False, 300, empty=True)]
    s = stats(rows)
    assert (s["n"], s["exact_match"], s["empty_rate"], s["edit_similarity"]) == (2, 0.5, 0.5, 0.75)
    assert (s["latency_p50_ms"], s["latency_p90_ms"]) == (200.0, 280.0)
    assert s["small_first_prompt_rate"] == 0.5 and s["tokens_evaluated_mean"] == 10.0
    assert s["exact_match_ci95"] == list(wilson(1, 2))  # type: ignore[arg-type]
    assert stats([])["n"] == 0 and stats([])["exact_match"] is None


def test_summary_per_request_group_and_visit() -> None:
    rows = [
        answer("cold", True, False, 3000),
        answer("warm", True, True, 50),
        answer("warm", False, True, 40),
        answer("revisited", True, True, 5),
        answer("cold", True, True, 9000, request="invoked"),
    ]
    entries = served_summary(rows)

    def get(request: str, group: str, visit: str) -> dict[str, Any]:
        return next(e for e in entries if (e["request"], e["group"], e["visit"]) == (request, group, visit))

    assert get("automatic", "all", "first_pass")["n"] == 3  # revisits are repeats, not in the first pass
    assert get("automatic", "cross_file", "first_pass")["exact_match"] == 0.5
    assert get("automatic", "same_file", "warm")["n"] == 1
    assert get("automatic", "all", "revisited")["latency_p50_ms"] == 5.0
    assert get("invoked", "all", "cold")["exact_match"] == 1.0 and get("invoked", "all", "warm")["n"] == 0
    text = table(entries)
    assert "exact (95% CI)" in text.splitlines()[0] and "revisited" in text
    shown = [line for line in text.splitlines() if "invoked" in line]
    assert len(shown) == 4  # all and cross-file, cold and first pass: entries with n=0 are left out
    assert "<table>" in table_html(entries) and "first_pass" in table_html(entries)


def ceiling(context: bool, exact: bool, case: str) -> dict[str, Any]:
    return {
        "model": "m",
        "context": context,
        "id": case,
        "cross_file": True,
        "exact": exact,
        "edit_similarity": 1.0 if exact else 0.0,
        "prediction": "x" if exact else "",
        "latency_ms": 900.0,
    }


def test_ceiling_rows_in_the_same_table_and_paired_with_the_served_ones() -> None:
    rows = [ceiling(True, True, "a.py:1:1"), ceiling(True, True, "a.py:2:1")]
    rows.append(ceiling(False, False, "a.py:1:1"))
    entries = ceiling_summary(rows)
    on = next(e for e in entries if e["request"] == "context" and e["group"] == "all")
    assert (on["mode"], on["n"], on["exact_match"]) == ("ceiling", 2, 1.0)
    assert on["think_ms"] is None and on["visit"] is None
    off = next(e for e in entries if e["request"] == "no context" and e["group"] == "all")
    assert off["empty_rate"] == 1.0
    served = [
        answer("cold", True, False, 1, case="a.py:1:1"),
        answer("warm", True, True, 2, case="a.py:2:1"),
        answer("warm", True, True, 3, case="a.py:3:1", ceiling_position=False),  # not the ceiling's place
        answer("revisited", True, True, 4, case="a.py:1:1"),
    ]
    (v,) = versus_ceiling(served, rows)
    assert (v["n"], v["served_exact_match"], v["ceiling_exact_match"]) == (2, 0.5, 1.0)
    assert (v["lost_to_serving"], v["won_by_serving"], v["ceiling_no_context_exact_match"]) == (1, 0, 0.0)
    assert "ceiling" in table(entries)
