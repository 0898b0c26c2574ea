"""The evaluation's results: summaries per model and context setting, a recommendation, JSON and HTML.

The HTML report is one self-contained file (inline CSS and SVG charts drawn here, no scripts, no
network), so it can be opened from a laptop without internet or attached to an issue.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fimble.evaluation.metrics import percentile, summarize
from fimble.evaluation.paired import paired_effect

__all__ = [
    "EFFECT_GROUPS",
    "GROUPS",
    "build_report",
    "condition",
    "context_effect",
    "in_group",
    "paired_outcomes",
    "recommend",
    "render_html",
    "typing_latency_ms",
    "write_report",
]

# ``cross_file_unseen``: cross-file lines using a name the file does not show above the cursor, the
# lines only repository context can help with (a subset of ``cross_file``).
GROUPS = ("all", "cross_file", "cross_file_unseen", "other", "line_start", "mid_line")
EFFECT_GROUPS = ("all", "cross_file", "cross_file_unseen", "other")  # (the groups the target names)
_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def condition(row: dict[str, Any]) -> str:
    return f"{row['model']} · {'context' if row['context'] else 'no context'}"


def in_group(row: dict[str, Any], group: str) -> bool:
    if group == "all":
        return True
    if group == "cross_file":
        return bool(row["cross_file"])
    if group == "cross_file_unseen":
        return bool(row.get("cross_file_unseen"))
    if group == "other":
        return not row["cross_file"]
    return bool(row["kind"] == group)


def _summaries(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for cond in dict.fromkeys(condition(r) for r in rows):
        mine = [r for r in rows if condition(r) == cond]
        out[cond] = {
            "model": mine[0]["model"],
            "context": mine[0]["context"],
            "groups": {g: summarize(r for r in mine if in_group(r, g)).as_dict() for g in GROUPS},
        }
    return out


def _prompt_speed(rows: Sequence[dict[str, Any]], model: str) -> float:
    """Tokens per second of prompt evaluation measured for ``model`` (0 when nothing was evaluated)."""
    tokens = sum(r["tokens_evaluated"] for r in rows if r["model"] == model)
    ms = sum(r["prompt_ms"] for r in rows if r["model"] == model)
    return tokens / (ms / 1000) if ms > 0 else 0.0


_TYPING_TOKENS = 4  # what a keystroke evaluates in a warm region (issue #5's target: median <= 4)


def typing_latency_ms(row: dict[str, Any], speed: float) -> float:
    """What the sample's suggestion costs once its region is warm, as the server answers while typing:
    context gathering, a few new tokens evaluated, and the generation.

    Every sample is a cold region (its whole prompt evaluated), but the server never makes a keystroke
    wait for that: a cold region answers from a first prompt (a share of the full one) and warms the
    full one while the user is idle. Judging settings by the cold latency made the recommendation
    "context off" on every machine, the opposite of the product's default."""
    evaluate = _TYPING_TOKENS / speed * 1000 if speed > 0 else 0.0
    return row.get("context_ms", 0.0) + evaluate + row.get("generation_ms", 0.0)


def recommend(
    rows: Sequence[dict[str, Any]],
    summaries: dict[str, dict[str, Any]],
    *,
    target_ms: float = 1000.0,
    warmup_s: float = 20.0,
) -> dict[str, Any]:
    """The model and context setting to use on this machine, and the context budget whose whole prompt
    warms up within ``warmup_s`` of idle time in a new region.

    Best exact match (edit similarity breaks ties) among settings whose median typing-time latency
    (``typing_latency_ms``) meets ``target_ms``; when none does, the fastest, said as such.
    """
    if not summaries:
        return {"text": "no results"}
    speeds = {m: _prompt_speed(rows, m) for m in dict.fromkeys(r["model"] for r in rows)}

    def key(cond: str) -> tuple[float, float]:
        g = summaries[cond]["groups"]["all"]
        return (g["exact_match"] or 0.0, g["edit_similarity"] or 0.0)

    def typing_p50(cond: str) -> float:
        ms = [typing_latency_ms(r, speeds[r["model"]]) for r in rows if condition(r) == cond]
        return percentile(ms, 50)

    typing = {c: typing_p50(c) for c in summaries}
    fits = [c for c in summaries if typing[c] <= target_ms]
    if fits:
        best = max(fits, key=key)
        why = f"best exact match with a median of {target_ms:.0f} ms or less per suggestion while typing"
    else:
        best = min(summaries, key=typing.__getitem__)
        why = f"no setting met {target_ms:.0f} ms per suggestion while typing; this is the fastest"
    model = summaries[best]["model"]
    speed = speeds[model]
    mine = [r for r in rows if condition(r) == best]
    prompt = percentile([r["prompt_tokens"] for r in mine], 50)
    base = percentile([r["prompt_tokens"] - r["context_tokens"] for r in rows if r["model"] == model], 50)
    budget = max(0, int((speed * warmup_s - base) // 128 * 128)) if speed else 0
    warm_s = prompt / speed if speed else math.inf
    g = summaries[best]["groups"]
    text = (
        f"Use {model} with repository context {'on' if summaries[best]['context'] else 'off'} ({why}: "
        f"exact match {_pct(g['all']['exact_match'])}, {typing[best]:.0f} ms per suggestion once a region "
        f"is warm). A new region's whole prompt (median {prompt:.0f} tokens) takes {warm_s:.0f} s of idle "
        f"time to warm up at the measured {speed:.0f} tokens/s; until then suggestions come from a small "
        f"first prompt (firstSuggestionMs). A context budget of about {budget} tokens on top of the "
        f"file's {base:.0f} keeps that warm-up within {warmup_s:.0f} s."
    )
    return {
        "condition": best,
        "model": model,
        "context": summaries[best]["context"],
        "typing_latency_p50_ms": {c: round(v, 1) for c, v in typing.items()},
        "prompt_tokens_per_s": round(speed, 1),
        "warmup_s": round(warm_s, 1),
        "context_budget_tokens": budget,
        "target_ms": target_ms,
        "text": text,
    }


def build_report(rows: Sequence[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    summaries = _summaries(rows)
    return {
        "meta": meta,
        "summaries": summaries,
        "context_effect": context_effect(rows),
        "recommendation": recommend(rows, summaries),
        "samples": list(rows),
    }


def paired_outcomes(rows: Sequence[dict[str, Any]], model: str, group: str) -> list[tuple[bool, bool]]:
    """(exact without context, exact with context) for each of ``model``'s lines in ``group`` that
    was answered both ways (a line's ``id`` pairs its two rows)."""
    off = {r["id"]: r for r in rows if r["model"] == model and not r["context"]}
    on = {r["id"]: r for r in rows if r["model"] == model and r["context"]}
    return [(bool(off[i]["exact"]), bool(on[i]["exact"])) for i in off if i in on and in_group(off[i], group)]


def context_effect(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model and group, on the lines answered both with and without context: exact match each
    way, the relative change, the lines won and lost, and how sure the change is."""
    out: dict[str, dict[str, Any]] = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        if not paired_outcomes(rows, model, "all"):
            continue
        out[model] = {g: paired_effect(paired_outcomes(rows, model, g)).as_dict() for g in EFFECT_GROUPS}
    return out


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _bars(title: str, series: dict[str, list[float | None]], labels: Sequence[str], unit: str = "%") -> str:
    """A grouped bar chart: one group per label, one bar per series (condition)."""
    width, left, top = 640, 48, 28
    bottom = 30 + 16 * len(series)  # axis labels, then one legend row per series
    height = 200 + bottom
    values = [v for vs in series.values() for v in vs if v is not None]
    vmax = (1.0 if unit == "%" else max(values, default=1.0) * 1.1) or 1.0
    plot_w, plot_h = width - left - 10, height - top - bottom
    group_w = plot_w / max(1, len(labels))
    bar_w = group_w * 0.8 / max(1, len(series))
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">',
        f'<text x="{left}" y="16" class="t">{html.escape(title)}</text>',
    ]
    for k in range(5):
        y = top + plot_h * (1 - k / 4)
        tick = vmax * k / 4
        label = f"{100 * tick:.0f}%" if unit == "%" else f"{tick:.0f}"
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" class="a" text-anchor="end">{label}</text>')
    for gi, label in enumerate(labels):
        x0 = left + gi * group_w + group_w * 0.1
        out.append(
            f'<text x="{left + (gi + 0.5) * group_w:.1f}" y="{height - bottom + 16}" class="a" '
            f'text-anchor="middle">{html.escape(label)}</text>'
        )
        for si, (name, vs) in enumerate(series.items()):
            v = vs[gi]
            if v is None:
                continue
            h = plot_h * min(1.0, v / vmax)
            x = x0 + si * bar_w
            shown = f"{100 * v:.0f}%" if unit == "%" else f"{v:.0f}"
            out.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                f'fill="{_PALETTE[si % len(_PALETTE)]}"><title>{html.escape(name)}: {shown}</title></rect>'
            )
    out += _legend(list(series), height - bottom + 34)
    out.append("</svg>")
    return "\n".join(out)


def _legend(names: Sequence[str], y: float, x: float = 48) -> list[str]:
    """One row per series: a colour swatch and its name."""
    out = []
    for si, name in enumerate(names):
        row = y + 16 * si
        out.append(f'<rect x="{x}" y="{row - 9:.0f}" width="10" height="10" fill="{_PALETTE[si % 8]}"/>')
        out.append(f'<text x="{x + 14}" y="{row:.0f}" class="a">{html.escape(name)}</text>')
    return out


def _scatter(rows: Sequence[dict[str, Any]], conds: Sequence[str]) -> str:
    """Latency against tokens evaluated, one dot per completion: the cost model at a glance."""
    width, left, top = 640, 56, 28
    bottom = 30 + 16 * len(conds)
    height = 220 + bottom
    xs = [r["tokens_evaluated"] for r in rows] or [1]
    ys = [r["latency_ms"] for r in rows] or [1]
    xmax, ymax = max(xs) * 1.05 or 1, max(ys) * 1.05 or 1
    pw, ph = width - left - 10, height - top - bottom
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">',
        f'<text x="{left}" y="16" class="t">Latency (ms) against tokens evaluated, per completion</text>',
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" class="g"/>',
        f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" class="g"/>',
        f'<text x="{left - 4}" y="{top + 4}" class="a" text-anchor="end">{ymax:.0f}</text>',
        f'<text x="{left + pw}" y="{top + ph + 14}" class="a" text-anchor="end">{xmax:.0f} tokens</text>',
    ]
    for r in rows:
        ci = conds.index(condition(r))
        cx, cy = left + pw * r["tokens_evaluated"] / xmax, top + ph * (1 - r["latency_ms"] / ymax)
        out.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{_PALETTE[ci % 8]}" fill-opacity="0.7">'
            f"<title>{html.escape(r['id'])}: {r['tokens_evaluated']} tokens, {r['latency_ms']:.0f} ms</title>"
            "</circle>"
        )
    out += _legend(list(conds), top + ph + 34)
    out.append("</svg>")
    return "\n".join(out)


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left} code,td.c{font-family:ui-monospace,monospace;font-size:12px}
td.c{text-align:left;white-space:pre} .ok{background:#e6f4e6} .rec{background:#eef4fb;padding:.7em 1em}
svg{margin:.4em 1em .4em 0} svg .t{font-size:13px;font-weight:600} svg .a{font-size:11px;fill:#444}
svg .g{stroke:#ddd}
"""


def render_html(report: dict[str, Any], *, max_rows: int = 300) -> str:
    """The report as one HTML page: the served table (when served), the recommendation, summary
    tables, charts, then every sample (when the ceiling ran)."""
    e = html.escape
    meta = report["meta"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>fimble eval</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>fimble eval — {e(str(meta.get('source', '')))}</h1>",
        f"<p>{e(_describe(meta))}</p>",
    ]
    if "served" in report:
        parts.extend(_served_section(report["served"]))
    if "summaries" not in report:
        parts.append("</body></html>")
        return "\n".join(parts)
    summaries, rows = report["summaries"], report["samples"]
    conds = list(summaries)
    parts += [
        f"<p class='rec'><b>Recommendation.</b> {e(report['recommendation'].get('text', ''))}</p>",
        "<h2>Summary</h2><table><tr><th class='l'>setting</th><th class='l'>lines</th><th>n</th>"
        "<th>exact match</th><th>edit similarity</th><th>identifier match</th><th>identifier F1</th>"
        "<th>latency p50 ms</th><th>p90 ms</th><th>tokens evaluated (mean)</th><th>prompt tokens</th></tr>",
    ]
    for cond, s in summaries.items():
        for group in GROUPS:
            g = s["groups"][group]
            if not g["n"]:
                continue
            parts.append(
                f"<tr><td class='l'>{e(cond)}</td><td class='l'>{group.replace('_', ' ')}</td>"
                f"<td>{g['n']}</td>"
                f"<td>{_pct(g['exact_match'])}</td><td>{_pct(g['edit_similarity'])}</td>"
                f"<td>{_pct(g['identifier_exact'])}</td><td>{_pct(g['identifier_f1'])}</td>"
                f"<td>{g['latency_p50_ms']:.0f}</td><td>{g['latency_p90_ms']:.0f}</td>"
                f"<td>{g['tokens_evaluated_mean']:.0f}</td><td>{g['prompt_tokens_mean']:.0f}</td></tr>"
            )
    parts.append("</table>")
    parts.extend(_effect_table(report.get("context_effect", {})))
    labels = ["all", "cross-file", "not above", "other", "line start", "mid-line"]

    def series(metric: str) -> dict[str, list[float | None]]:
        return {c: [summaries[c]["groups"][g][metric] for g in GROUPS] for c in conds}

    parts.append("<h2>Charts</h2>")
    parts.append(_bars("Exact match", series("exact_match"), labels))
    parts.append(_bars("Edit similarity", series("edit_similarity"), labels))
    parts.append(_bars("Identifier F1", series("identifier_f1"), labels))
    lat = {c: [summaries[c]["groups"]["all"][k] for k in ("latency_p50_ms", "latency_p90_ms")] for c in conds}
    parts.append(_bars("Latency (ms)", lat, ["p50", "p90"], unit="ms"))
    parts.append(_scatter(rows, conds))
    parts.append(
        f"<h2>Samples</h2><p>First {min(max_rows, len(rows))} of {len(rows)} completions; green: exact.</p>"
        "<table><tr><th class='l'>where</th><th class='l'>setting</th><th class='l'>kind</th>"
        "<th class='l'>truth</th><th class='l'>suggestion</th><th>edit sim.</th><th>ms</th>"
        "<th class='l'>context chunks</th></tr>"
    )
    for r in rows[:max_rows]:
        chunks = "; ".join(f"{c['path']} ({c['reason']})" for c in r["chunks"])
        kind = r["kind"] + (" · cross-file: " + ", ".join(r["cross_file_names"]) if r["cross_file"] else "")
        if r.get("cross_file_unseen"):
            kind += " (not above: " + ", ".join(r["cross_file_unseen"]) + ")"
        parts.append(
            f"<tr class='{'ok' if r['exact'] else ''}'><td class='l'>{e(r['id'])}</td>"
            f"<td class='l'>{e(condition(r))}</td><td class='l'>{e(kind)}</td>"
            f"<td class='c'>{e(r['truth'])}</td><td class='c'>{e(r['prediction'])}</td>"
            f"<td>{r['edit_similarity']:.2f}</td><td>{r['latency_ms']:.0f}</td>"
            f"<td class='l'><small>{e(chunks)}</small></td></tr>"
        )
    parts.append("</table></body></html>")
    return "\n".join(parts)


def _served_section(served: dict[str, Any]) -> list[str]:
    """What a user of ``fimble serve`` gets: the served summary table and the paired comparison."""
    from fimble.evaluation.served_report import table_html

    think = ", ".join(f"{t} ms" for t in served.get("settings", {}).get("think_ms", []))
    parts = [
        "<h2>Served</h2><p>Answers of a real <code>fimble serve</code> over LSP at two positions per "
        f"line (line start, mid-line), think times {html.escape(think)}, each in a fresh server. "
        "Visit: cold is the first position in its file, warm a later one, revisited the pass at the "
        "end; first pass is cold and warm together. small: share of requests during which the "
        "server read a small first prompt (from before the didFocus, for automatic requests).</p>",
        table_html(served.get("summary", [])),
    ]
    paired = served.get("versus_ceiling") or []
    if paired:
        parts.append(
            "<h3>Served against the ceiling, on the ceiling's positions</h3><table><tr>"
            "<th class='l'>model</th><th>think</th><th class='l'>request</th><th>n</th><th>served</th>"
            "<th>ceiling (context)</th><th>ceiling (no context)</th><th>lost to serving</th>"
            "<th>won by serving</th></tr>"
        )
        for v in paired:
            parts.append(
                f"<tr><td class='l'>{html.escape(v['model'])}</td><td>{v['think_ms']} ms</td>"
                f"<td class='l'>{v['request']}</td><td>{v['n']}</td><td>{_pct(v['served_exact_match'])}</td>"
                f"<td>{_pct(v['ceiling_exact_match'])}</td><td>{_pct(v['ceiling_no_context_exact_match'])}</td>"
                f"<td>{v['lost_to_serving']}</td><td>{v['won_by_serving']}</td></tr>"
            )
        parts.append("</table>")
    return parts


def _effect_table(effect: dict[str, dict[str, Any]]) -> list[str]:
    """What context changed on the same lines: won, lost, and how likely that is by chance."""
    if not effect:
        return []
    names = {"all": "all", "cross_file": "cross-file", "cross_file_unseen": "not above", "other": "other"}
    parts = [
        "<h2>Context effect</h2><p>The same lines answered without and with repository context. Won: "
        "right only with context; lost: right only without. p: exact sign test on won against lost; "
        "interval: 95% bootstrap over the lines.</p><table><tr><th class='l'>model</th>"
        "<th class='l'>lines</th><th>n</th><th>without</th><th>with</th><th>relative change</th>"
        "<th>won</th><th>lost</th><th>p</th><th>interval</th></tr>"
    ]
    for model, groups in effect.items():
        for group, g in groups.items():
            if not g.get("n"):
                continue
            rel = "" if g["relative_change"] is None else f"{g['relative_change']:+.0%}"
            ci = "" if not g.get("interval") else f"{g['interval'][0]:+.0%} … {g['interval'][1]:+.0%}"
            p = "" if g.get("p_value") is None else f"{g['p_value']:.3g}"
            parts.append(
                f"<tr><td class='l'>{html.escape(model)}</td><td class='l'>{names.get(group, group)}</td>"
                f"<td>{g['n']}</td><td>{_pct(g['without'])}</td><td>{_pct(g['with'])}</td><td>{rel}</td>"
                f"<td>{g['won']}</td><td>{g['lost']}</td><td>{p}</td><td>{ci}</td></tr>"
            )
    parts.append("</table>")
    return parts


def _describe(meta: dict[str, Any]) -> str:
    return (
        f"{meta.get('samples', '?')} masked lines of {meta.get('files', '?')} files "
        f"(seed {meta.get('seed', '?')}), models {', '.join(meta.get('models', []))}; "
        f"machine: {meta.get('machine', {}).get('cpu', '?')}, {meta.get('machine', {}).get('threads', '?')} "
        f"threads; prefix {meta.get('prefix_budget', '?')} / suffix {meta.get('suffix_budget', '?')} tokens; "
        f"started {meta.get('started', '?')}, took {meta.get('seconds', 0):.0f} s."
    )


def write_report(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``eval.json`` and ``eval.html`` into ``out`` (created if needed)."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "eval.json", out / "eval.html"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path
