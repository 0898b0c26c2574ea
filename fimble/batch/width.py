"""How many sequences a batch decodes together (``fimble batch --width auto``).

Two limits, the smaller wins:

- **The throughput curve.** One decode step of ``w`` sequences costs one pass over the weights
  plus ``w`` tokens of compute; on a CPU the compute soon dominates, and past some width a wider
  step is no faster per token. Where that knee lies depends on the CPU, its SIMD path, the model
  and the threads, so it is measured (``measure_curve``: a few decode steps at widths 1, 2, 4, ...
  on the loaded model, about a minute) once per machine, model, llama.cpp build and thread count,
  and kept beside the CPU path's verdict. The width chosen is the narrowest reaching
  ``KNEE_SHARE`` of the best rate: a wider batch would cost KV memory and gain nothing.
- **KV memory.** Each sequence holds a pool of ``CELLS_PER_SEQ`` KV cells (the batch command's
  context is ``width × CELLS_PER_SEQ``); the width never asks for more than ``MEMORY_SHARE`` of
  the memory available now.

And never more sequences than there are requests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fimble import paths

__all__ = [
    "CELLS_PER_SEQ",
    "Choice",
    "Measured",
    "available_memory",
    "cached_curve",
    "choose_width",
    "knee",
    "measure_curve",
]

log = logging.getLogger(__name__)

CELLS_PER_SEQ = 1024  # KV cells per batch sequence (prompt of ~900 tokens plus its answer)
KNEE_SHARE = 0.9  # the narrowest width reaching this share of the best measured tokens/s
MEMORY_SHARE = 0.5  # of the memory available, at most this much for the batch's KV cells
PROBE_WIDTHS = (1, 2, 4, 8, 16, 32, 64)
_PROBE_STEPS = 8  # decode steps timed per width (after two untimed ones)
_CURVE_VERSION = 1
# A plain prompt whose greedy continuation runs on for many tokens (no end of generation early).
_PROBE_TEXT = (
    "# The first hundred prime numbers, in order.\nPRIMES = [\n    2, 3, 5, 7, 11, 13, 17, 19, 23, 29,\n"
)


@dataclass(frozen=True)
class Choice:
    """The width and why: the curve's knee, the memory's bound, the number of requests."""

    width: int
    knee: int
    memory: int
    requests: int
    curve: Mapping[int, float] = field(default_factory=dict)  # width -> generated tokens/s

    def reason(self) -> str:
        limit = min(
            (self.knee, "the throughput curve's knee"),
            (self.memory, "the KV memory available"),
            (self.requests, "the number of requests"),
        )[1]
        rates = ", ".join(f"{w}: {r:.0f}" for w, r in sorted(self.curve.items()))
        return f"width {self.width}, set by {limit} (tokens/s by width: {rates})"


def knee(curve: Mapping[int, float], share: float = KNEE_SHARE) -> int:
    """The narrowest measured width whose tokens/s reaches ``share`` of the best one's."""
    if not curve:
        return 1
    best = max(curve.values())
    return min(w for w, rate in curve.items() if rate >= share * best)


def available_memory() -> int:
    """Bytes the system can give now (``MemAvailable``); 0 where it does not say."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def choose_width(
    curve: Mapping[int, float],
    requests: int,
    bytes_per_cell: int,
    *,
    memory: int | None = None,
    most: int = 254,
) -> Choice:
    """The width for ``requests`` requests: the curve's knee, within what the KV memory allows."""
    memory = available_memory() if memory is None else memory
    if memory > 0 and bytes_per_cell > 0:
        by_memory = max(1, int(memory * MEMORY_SHARE) // (bytes_per_cell * CELLS_PER_SEQ))
    else:
        by_memory = most
    at_knee = knee(curve)
    width = max(1, min(at_knee, by_memory, requests, most))
    return Choice(width, at_knee, by_memory, requests, dict(curve))


def measure_curve(
    engine: Any,
    widths: tuple[int, ...] = PROBE_WIDTHS,
    *,
    on_width: Callable[[int], None] | None = None,
) -> dict[int, float]:
    """Generated tokens/s of ``engine.generate_batch`` at each width (as many as it has batch slots).

    Every sequence gets the same prompt (copied after the first, so only decode steps differ), and
    the same number of tokens is generated twice, ``2`` and ``2 + _PROBE_STEPS``: the difference is
    the cost of ``_PROBE_STEPS`` decode steps alone. Every width is measured (about a minute for
    the 1.5B model on 2 cores, once): the curve is not monotonic (on a 2-core AVX2 machine width 8
    decoded at 10-13 tokens/s against 18 at width 4, and 32 was the best, at 29)."""
    prompt = engine.model.tokenize(_PROBE_TEXT)
    slots = len(engine.batch_slots)
    curve: dict[int, float] = {}
    for w in widths:
        if w > slots:
            break
        if on_width is not None:
            on_width(w)
        engine.generate_batch([prompt] * w, max_tokens=1)  # the head in the slots' cells, as below
        spent = []
        for n in (2, 2 + _PROBE_STEPS):
            started = time.perf_counter()
            out = engine.generate_batch([prompt] * w, max_tokens=n)
            spent.append(time.perf_counter() - started)
            if any(len(g.tokens) < n for g in out):
                return curve  # the probe text ended early: keep what was measured
        curve[w] = w / max(1e-6, (spent[1] - spent[0]) / _PROBE_STEPS)
    return curve


def _curve_file(key: str, threads: int) -> Path:
    env = os.environ.get("FIMBLE_CPU_PATH_DIR")
    base = Path(env).expanduser() if env else paths.cache_root() / "cpu-path"
    return base / f"batch-curve-{key}-t{threads}.json"


@dataclass(frozen=True)
class Measured:
    """What the width depends on about the machine and model: the curve and a KV cell's bytes."""

    curve: dict[int, float]
    bytes_per_cell: int


def cached_curve(key: str, threads: int, measure: Callable[[], Measured]) -> Measured:
    """The curve kept for this machine, model, build and thread count (``key``), else ``measure()``'s,
    kept atomically for next time (a read-only home only means measuring again next run)."""
    record = _curve_file(key, threads)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        data = json.loads(record.read_text(encoding="utf-8"))
        if data["version"] == _CURVE_VERSION and data["curve"]:
            curve = {int(w): float(r) for w, r in data["curve"].items()}
            return Measured(curve, int(data["bytes_per_cell"]))
    measured = measure()
    if measured.curve:
        with contextlib.suppress(OSError):
            record.parent.mkdir(parents=True, exist_ok=True)
            tmp = record.with_suffix(f".{os.getpid()}.tmp")
            body = {
                "version": _CURVE_VERSION,
                "curve": {str(w): round(r, 2) for w, r in measured.curve.items()},
                "bytes_per_cell": measured.bytes_per_cell,
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }
            tmp.write_text(json.dumps(body), encoding="utf-8")
            os.replace(tmp, record)
    return measured
