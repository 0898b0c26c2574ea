"""Draw the speed figures of docs/performance.md from the JSON the benchmarks wrote (`make plots`).

Reads bench/results/*.json only, never runs a benchmark, and writes SVG files to docs/images/:

- keystroke_latency.svg: keystroke -> suggestion percentiles, through the language server
  (typing*.json, bench/typing_replay.py) and through the completer (keystroke*.json, bench/keystroke.py);
- first_suggestion.svg: the first suggestion at a cold place, per file and scenario (typing*.json,
  restart.json from bench/restart.py), against the 400 ms and 2 s goals;
- cpu_path.svg: prompt and generation speed per CPU path (cpu_path*.json, bench/cpu_path.py).

The files are committed with this script; the output is deterministic (no dates, fixed ids), so a
re-run without new results changes nothing. Needs matplotlib: pip install -e '.[plots]'. (Throughput
against batch width is not drawn: there is no batch pipeline yet.)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt

__all__ = ["cpu_path", "first_suggestion", "keystroke_latency", "main"]

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
OUT = ROOT / "docs" / "images"

plt.rcParams.update(
    {
        "svg.hashsalt": "fimble",  # stable ids, so an unchanged figure is an unchanged file
        "svg.fonttype": "none",  # text stays text: small files, searchable
        "font.family": "DejaVu Sans",
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)
_COLORS = ("#1a73e8", "#e8710a", "#d93025", "#188038")


def _load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def _save(fig: Any, name: str) -> Path:
    path = OUT / name
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    plt.close(fig)
    return path


def keystroke_latency() -> Path:
    """p50/p90/p99 of keystroke -> suggestion, one row per run, log scale (0 ms drawn at the axis)."""
    rows: list[tuple[str, Sequence[float | None]]] = []
    for name, label in (
        ("typing.json", "LSP, didFocus + 1 s pause"),
        ("typing_no_pause.json", "LSP, typed at once"),
        ("typing_back_next.json", "LSP, back at the next line"),
    ):
        data = _load(name)
        lat = data["typing"]["latency_ms"]
        rows.append((f"{label} ({data['typing']['keystrokes']} keys)", (lat["p50"], lat["p90"], lat["p99"])))
    restart = _load("typing.json")["restart_then_typing"]
    lat = restart["latency_ms"]
    rows.append(
        (f"LSP, after a restart ({restart['keystrokes']} keys)", (lat["p50"], lat["p90"], lat["p99"]))
    )
    for name, label in (
        ("keystroke.json", "completer, stdlib"),
        ("keystroke_unseen.json", "completer, fimble"),
    ):
        data = _load(name)
        rows.append(
            (f"{label} ({data['keystrokes']} keys)", (data["request_ms_p50"], data["request_ms_p90"], None))
        )
    floor = 0.5
    fig, ax = plt.subplots(figsize=(8, 4.2))
    height = 0.26
    for i, (_label, values) in enumerate(rows):
        for j, (value, color, name) in enumerate(zip(values, _COLORS, ("p50", "p90", "p99"), strict=False)):
            if value is None:
                continue
            y = i + (j - 1) * height
            ax.barh(y, max(value, floor), height=height, color=color, label=name if i == 0 else None, left=0)
            text = f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms" if value else "0 ms"
            ax.text(max(value, floor) * 1.08, y, text, va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(floor, 20_000)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    for goal, text in ((150, "p50 goal 150 ms"), (700, "p90 goal 700 ms")):
        ax.axvline(goal, color="#5f6368", linestyle="--", linewidth=1)
        ax.text(
            goal * 0.92,
            0.03,
            text,
            fontsize=8,
            color="#5f6368",
            rotation=90,
            ha="right",
            va="bottom",
            transform=ax.get_xaxis_transform(),
        )
    ax.set_xlabel("keystroke → suggestion (ms, log scale; 0 ms drawn at the left edge)")
    ax.set_title("Per-keystroke latency, Qwen2.5-Coder-1.5B on 2 cores")
    ax.legend(loc="lower right", frameon=False)
    return _save(fig, "keystroke_latency.svg")


def first_suggestion() -> Path:
    """The first suggestion at a cold place, per scenario, against the 400 ms and 2 s goals."""
    series: list[tuple[str, list[float], int]] = []
    for name, label in (
        ("typing.json", "didFocus + pause"),
        ("typing_no_pause.json", "typed at once"),
        ("typing_back_next.json", "didFocus, next line"),
    ):
        first = _load(name)["first_request_ms"]
        series.append((f"first in a file ({label})", first["first_in_file"], 0))
        series.append((f"back in a file ({label})", first["back_in_file"], 1))
    restart = {r["kind"]: r["ms"] for r in _load("typing.json")["restart"]}
    again = [restart["same_request"], restart["new_line_in_seen_file"]]
    series.append(("after a restart: same place, new line", again, 3))
    cold = {r["scenario"]: r["latency_ms"] for r in _load("restart.json")["requests"]}
    scenarios = [cold["new_file_first"], cold["switch_back"], cold["after_restart"]]
    series.append(("no didFocus: new file, switch back, restart", scenarios, 3))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for i, (_label, values, color) in enumerate(series):
        ax.scatter(values, [i] * len(values), color=_COLORS[color], zorder=3, s=28)
    ax.set_xscale("log")
    ax.set_xlim(1, 5_000)
    ax.set_yticks(range(len(series)), [label for label, _values, _color in series])
    ax.invert_yaxis()
    for goal, text in ((400, "back in a file: 400 ms"), (2000, "new file: 2 s")):
        ax.axvline(goal, color="#5f6368", linestyle="--", linewidth=1)
        ax.text(
            goal * 0.92,
            0.03,
            text,
            fontsize=8,
            color="#5f6368",
            rotation=90,
            ha="right",
            va="bottom",
            transform=ax.get_xaxis_transform(),
        )
    ax.set_xlabel("first suggestion (ms, log scale)")
    ax.set_title("First suggestion at a cold place (one dot per file or request)")
    return _save(fig, "first_suggestion.svg")


def cpu_path() -> Path:
    """Prompt and generation speed per CPU path, here and on the machine whose AMX faults."""
    machines = (("this machine", _load("cpu_path.json")), ("AMX simulated", _load("cpu_path_amx_sim.json")))
    paths = ("full", "no-amx", "plain")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), sharey=False)
    for ax, metric, title in zip(
        axes, ("prompt_tok_s", "generation_tok_s"), ("prompt (512 tokens)", "generation"), strict=True
    ):
        for m, (_machine, data) in enumerate(machines):
            for p, path in enumerate(paths):
                x = m * (len(paths) + 1) + p
                entry = data["paths"].get(path)
                if entry is None:
                    continue
                value = entry[metric]
                if value is None:
                    ax.text(x, 2, "died\n(SIGILL)", ha="center", fontsize=7.5, color=_COLORS[2])
                    continue
                ax.bar(x, value, color=_COLORS[p])
                ax.text(x, value * 1.02, f"{value:.0f}", ha="center", va="bottom", fontsize=8)
        centers = [m * (len(paths) + 1) + 1 for m in range(len(machines))]
        ax.set_xticks(centers, [name for name, _ in machines])
        ax.set_ylabel("tokens/s")
        ax.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=_COLORS[p]) for p in range(len(paths))]
    fig.legend(
        handles, paths, loc="lower center", ncol=len(paths), frameon=False, bbox_to_anchor=(0.5, -0.06)
    )
    fig.suptitle("CPU paths, Qwen2.5-Coder-1.5B, 2 threads (bench/cpu_path.py, medians of 3)", y=1.02)
    fig.tight_layout()
    return _save(fig, "cpu_path.svg")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    for draw in (keystroke_latency, first_suggestion, cpu_path):
        print(draw().relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
