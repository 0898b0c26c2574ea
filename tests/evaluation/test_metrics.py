"""Scores of a suggestion against the truth, and summaries."""

from __future__ import annotations

import math

import pytest

from fimble.evaluation.metrics import (
    edit_similarity,
    identifier_f1,
    levenshtein,
    percentile,
    score,
    summarize,
)


def test_levenshtein() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert levenshtein("abc", "abc") == 0


def test_edit_similarity_ignores_surrounding_space() -> None:
    assert edit_similarity("foo(a) ", "foo(a)") == 1.0
    assert edit_similarity("", "") == 1.0
    assert edit_similarity("foo(b)", "foo(a)") == pytest.approx(1 - 1 / 6)


def test_identifier_f1() -> None:
    assert identifier_f1("a.b(c)", "a.b(c)") == 1.0
    assert identifier_f1("x = 1", "y = 2") == 0.0
    assert identifier_f1("+ 1", "- 2") == 1.0  # no names either side
    assert identifier_f1("get(url)", "get(url, params)") == pytest.approx(0.8)


def test_score_judges_the_first_line_only() -> None:
    s = score("return value\n    more stuff", "return value")
    assert s.exact and s.identifier_exact and s.edit_similarity == 1.0
    s = score("return valu", "return value")
    assert not s.exact and not s.identifier_exact and s.edit_similarity > 0.9
    assert not score("  return value", "return value").exact  # extra indentation is wrong in an editor


def test_percentile() -> None:
    assert percentile([3, 1, 2], 50) == 2
    assert percentile([0, 10], 90) == 9
    assert math.isnan(percentile([], 50))


def test_summarize() -> None:
    rows = [
        {
            "exact": True,
            "edit_similarity": 1.0,
            "identifier_exact": True,
            "identifier_f1": 1.0,
            "latency_ms": 100.0,
            "tokens_evaluated": 10,
            "prompt_tokens": 500,
        },
        {
            "exact": False,
            "edit_similarity": 0.5,
            "identifier_exact": False,
            "identifier_f1": 0.0,
            "latency_ms": 300.0,
            "tokens_evaluated": 30,
            "prompt_tokens": 700,
        },
    ]
    s = summarize(rows)
    assert (s.n, s.exact_match, s.edit_similarity, s.latency_p50_ms) == (2, 0.5, 0.75, 200.0)
    assert s.prompt_tokens_mean == 600
    empty = summarize([]).as_dict()
    assert empty["n"] == 0 and empty["exact_match"] is None
