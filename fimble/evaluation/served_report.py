"""Summaries of the served evaluation: what users get, per think time, request kind, line group, visit.

Rows are the answers ``fimble.evaluation.served`` recorded (one per position and request kind);
``ceiling`` rows (the in-process full-prompt path) can be summarized the same way, so one table
compares the two. Exact match comes with a 95% Wilson interval: on a few dozen positions one answer
moves it by several points, and the interval says how far apart two settings must be to differ.
Pure functions over dicts.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

from fimble.evaluation.metrics import percentile

__all__ = [
    "GROUPS",
    "VISITS",
    "ceiling_summary",
    "served_summary",
    "stats",
    "table",
    "table_html",
    "versus_ceiling",
    "wilson",
]

GROUPS = ("all", "cross_file", "same_file")
# ``first_pass``: every position asked once (cold and warm); ``revisited`` positions are repeats.
VISITS = ("first_pass", "cold", "warm", "revisited")
_Z = 1.959964  # 95%


def wilson(k: int, n: int, z: float = _Z) -> tuple[float, float] | None:
    """The Wilson score interval of ``k`` successes in ``n`` trials (None for no trials): unlike
    p ± z·se it stays inside [0, 1] and is not empty at 0 or n successes."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (round(max(0.0, center - half), 4), round(min(1.0, center + half), 4))


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _pct(xs: Sequence[float], q: float) -> float | None:
    return round(percentile(xs, q), 1) if xs else None


def stats(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """n, exact match with its 95% interval, edit similarity, the share of empty answers, latency
    p50/p90, and (served rows) tokens evaluated and the share of requests during which the server
    read a small first prompt (its counter grew: for an automatic request, counted from before the
    didFocus, so a focus's warm-up that the request adopts counts; an invoked one asks for the full
    prompt, so there it is a warm-up running beside it)."""
    rs = list(rows)
    exact = sum(bool(r["exact"]) for r in rs)
    small = [bool(r["small_first_prompt"]) for r in rs if r.get("small_first_prompt") is not None]
    evaluated = [
        float(r["server"]["tokens_evaluated"])
        for r in rs
        if isinstance(r.get("server"), dict) and r["server"].get("tokens_evaluated") is not None
    ]
    return {
        "n": len(rs),
        "exact_match": round(exact / len(rs), 4) if rs else None,
        "exact_match_ci95": list(ci) if (ci := wilson(exact, len(rs))) else None,
        "edit_similarity": _mean([float(r["edit_similarity"]) for r in rs]),
        "empty_rate": _mean([float(bool(r["empty"])) for r in rs]),
        "latency_p50_ms": _pct([float(r["latency_ms"]) for r in rs], 50),
        "latency_p90_ms": _pct([float(r["latency_ms"]) for r in rs], 90),
        "small_first_prompt_rate": _mean([float(s) for s in small]),
        "tokens_evaluated_mean": round(sum(evaluated) / len(evaluated), 1) if evaluated else None,
    }


def _in_group(row: dict[str, Any], group: str) -> bool:
    return group == "all" or bool(row["cross_file"]) == (group == "cross_file")


def _in_visit(row: dict[str, Any], visit: str) -> bool:
    return row["visit"] != "revisited" if visit == "first_pass" else row["visit"] == visit


def served_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per model × think time × request kind × group × visit (``stats`` plus those keys)."""
    out: list[dict[str, Any]] = []
    runs = dict.fromkeys((r["model"], r["think_ms"], r["request"]) for r in rows)
    for model, think, request in runs:
        mine = [r for r in rows if (r["model"], r["think_ms"], r["request"]) == (model, think, request)]
        for group in GROUPS:
            for visit in VISITS:
                chosen = [r for r in mine if _in_group(r, group) and _in_visit(r, visit)]
                out.append(
                    {
                        "mode": "served",
                        "model": model,
                        "think_ms": think,
                        "request": request,
                        "group": group,
                        "visit": visit,
                        **stats(chosen),
                    }
                )
    return out


def ceiling_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ceiling's rows (``fimble.evaluation.runner``) in the same entries: request is the context
    setting, and there is no think time or visit (every answer comes from the full prompt)."""
    out: list[dict[str, Any]] = []
    for model, context in dict.fromkeys((r["model"], r["context"]) for r in rows):
        mine = [
            {**r, "empty": not r["prediction"].strip()}
            for r in rows
            if (r["model"], r["context"]) == (model, context)
        ]
        for group in GROUPS:
            chosen = [r for r in mine if _in_group(r, group)]
            out.append(
                {
                    "mode": "ceiling",
                    "model": model,
                    "think_ms": None,
                    "request": "context" if context else "no context",
                    "group": group,
                    "visit": None,
                    **stats(chosen),
                }
            )
    return out


def versus_ceiling(
    served: Sequence[dict[str, Any]], ceiling: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Exact match served and in-process on the very positions the ceiling scores (each sample's own
    column, first visit), per model × think time × request kind: what serving costs, paired."""
    truth_of = {(r["model"], r["id"], r["context"]): bool(r["exact"]) for r in ceiling}
    out: list[dict[str, Any]] = []
    for model, think, request in dict.fromkeys((r["model"], r["think_ms"], r["request"]) for r in served):
        mine = [
            r
            for r in served
            if (r["model"], r["think_ms"], r["request"]) == (model, think, request)
            and r["ceiling_position"]
            and r["visit"] != "revisited"
            and (r["model"], r["case"], True) in truth_of
        ]
        if not mine:
            continue
        n = len(mine)
        on = sum(truth_of[(model, r["case"], True)] for r in mine)
        off = [truth_of[k] for r in mine if (k := (model, r["case"], False)) in truth_of]
        here = sum(bool(r["exact"]) for r in mine)
        lost = sum(truth_of[(model, r["case"], True)] and not r["exact"] for r in mine)
        won = sum(bool(r["exact"]) and not truth_of[(model, r["case"], True)] for r in mine)
        out.append(
            {
                "model": model,
                "think_ms": think,
                "request": request,
                "n": n,
                "served_exact_match": round(here / n, 4),
                "ceiling_exact_match": round(on / n, 4),
                "ceiling_no_context_exact_match": round(sum(off) / len(off), 4) if off else None,
                "lost_to_serving": lost,
                "won_by_serving": won,
            }
        )
    return out


def _short(model: str) -> str:
    name = model.rsplit("/", 1)[-1]
    return name[:-5] if name.endswith(".gguf") else name


def _p(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


_HEAD = (
    "mode",
    "model",
    "think",
    "request",
    "group",
    "visit",
    "n",
    "exact (95% CI)",
    "edit sim",
    "empty",
    "small",
    "p50 ms",
    "p90 ms",
)


def _cells(e: dict[str, Any]) -> tuple[str, ...]:
    ci = e.get("exact_match_ci95")
    exact = _p(e["exact_match"]) + (f" ({100 * ci[0]:.0f}-{100 * ci[1]:.0f})" if ci else "")
    return (
        e["mode"],
        _short(e["model"]),
        "-" if e["think_ms"] is None else f"{e['think_ms']} ms",
        e["request"],
        e["group"].replace("_", "-"),
        e["visit"] or "-",
        str(e["n"]),
        exact,
        _p(e["edit_similarity"]),
        _p(e["empty_rate"]),
        _p(e.get("small_first_prompt_rate")),
        _ms(e["latency_p50_ms"]),
        _ms(e["latency_p90_ms"]),
    )


def table(entries: Sequence[dict[str, Any]]) -> str:
    """The entries with any answers as an aligned text table (``small``: share of requests during
    which a small first prompt was read, see ``stats``)."""
    rows = [_HEAD, *(_cells(e) for e in entries if e["n"])]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    lines = [
        "  ".join(c.ljust(w) if i < 6 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def table_html(entries: Sequence[dict[str, Any]]) -> str:
    """The same table as HTML (for ``eval.html``)."""
    e = html.escape
    parts = ["<table><tr>" + "".join(f"<th class='l'>{e(h)}</th>" for h in _HEAD) + "</tr>"]
    for entry in entries:
        if entry["n"]:
            cells = (f"<td class='{'l' if i < 6 else ''}'>{e(c)}</td>" for i, c in enumerate(_cells(entry)))
            parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    return "\n".join(parts)
