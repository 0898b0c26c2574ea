"""How good a suggestion is against the masked line's truth, and summaries over many of them.

The measures are the usual ones for line completion (CodeXGLUE, CrossCodeEval): exact match of the
line, edit similarity (1 - Levenshtein distance / longer length, so a near-miss scores close to 1),
and identifier match (the suggestion uses the same names, in order: the part repository context can
fix). Only the first line of a suggestion is judged, since the truth is the rest of one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from fimble.evaluation.samples import identifiers

__all__ = [
    "Score",
    "Summary",
    "edit_similarity",
    "first_line",
    "identifier_f1",
    "levenshtein",
    "percentile",
    "score",
    "summarize",
]


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions), two rows of the usual table."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def edit_similarity(prediction: str, truth: str) -> float:
    p, t = prediction.strip(), truth.strip()
    if not p and not t:
        return 1.0
    return 1.0 - levenshtein(p, t) / max(len(p), len(t))


def identifier_f1(prediction: str, truth: str) -> float:
    """F1 of the identifiers of prediction and truth as multisets (1.0 when the truth has none and
    the prediction adds none)."""
    p, t = identifiers(prediction), identifiers(truth)
    if not p and not t:
        return 1.0
    rest = list(t)
    common = 0
    for name in p:
        if name in rest:
            rest.remove(name)
            common += 1
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class Score:
    exact: bool
    edit_similarity: float
    identifier_exact: bool
    identifier_f1: float


def score(prediction: str, truth: str) -> Score:
    """Judge the first line of ``prediction`` against ``truth`` (trailing spaces never count)."""
    line = first_line(prediction).rstrip()
    want = truth.rstrip()
    return Score(
        exact=line == want,
        edit_similarity=round(edit_similarity(line, want), 4),
        identifier_exact=identifiers(line) == identifiers(want),
        identifier_f1=round(identifier_f1(line, want), 4),
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    """Means and percentiles over a group of results."""

    n: int
    exact_match: float
    edit_similarity: float
    identifier_exact: float
    identifier_f1: float
    latency_p50_ms: float
    latency_p90_ms: float
    tokens_evaluated_mean: float
    tokens_evaluated_p50: float
    prompt_tokens_mean: float

    def as_dict(self) -> dict[str, float]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def summarize(rows: Iterable[dict[str, object]]) -> Summary:
    """Summary of result rows as the runner writes them (score fields, latency_ms, tokens)."""
    rs = list(rows)

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in rs]  # type: ignore[arg-type]

    return Summary(
        n=len(rs),
        exact_match=round(_mean(col("exact")), 4),
        edit_similarity=round(_mean(col("edit_similarity")), 4),
        identifier_exact=round(_mean(col("identifier_exact")), 4),
        identifier_f1=round(_mean(col("identifier_f1")), 4),
        latency_p50_ms=round(percentile(col("latency_ms"), 50), 1),
        latency_p90_ms=round(percentile(col("latency_ms"), 90), 1),
        tokens_evaluated_mean=round(_mean(col("tokens_evaluated")), 1),
        tokens_evaluated_p50=round(percentile(col("tokens_evaluated"), 50), 1),
        prompt_tokens_mean=round(_mean(col("prompt_tokens")), 1),
    )
