"""``--width auto``: the knee of the measured curve, bounded by KV memory and the number of requests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from fimble.batch.width import CELLS_PER_SEQ, Measured, cached_curve, choose_width, knee, measure_curve

# Tokens/s by width as a 2-core CPU gives them: compute catches up with the weights' read at 8.
CURVE = {1: 20.0, 2: 34.0, 4: 52.0, 8: 60.0, 16: 62.0, 32: 61.0}


def test_the_knee_is_the_narrowest_width_near_the_best_rate() -> None:
    assert knee(CURVE) == 8  # 60 >= 0.9 * 62; 52 is not
    assert knee({1: 10.0}) == 1
    assert knee({}) == 1


def test_memory_and_the_number_of_requests_bound_the_width() -> None:
    cell = 28_672  # Qwen2.5-Coder-1.5B: 28 layers, 2 KV heads of 128, K and V in f16
    roomy = choose_width(CURVE, 100, cell, memory=16 << 30)
    assert (roomy.width, roomy.knee) == (8, 8) and "knee" in roomy.reason()
    tight = choose_width(CURVE, 100, cell, memory=4 * cell * CELLS_PER_SEQ * 2)  # half may be used
    assert tight.width == 4 and "memory" in tight.reason()
    few = choose_width(CURVE, 3, cell, memory=16 << 30)
    assert few.width == 3 and "number of requests" in few.reason()
    assert choose_width({}, 100, cell, memory=16 << 30).width == 1


class _Probe:
    """An engine whose decode steps cost one weight read (10 ms) plus 2 ms per sequence."""

    def __init__(self, slots: int, step: Callable[[int], float] = lambda w: 0.010 + 0.002 * w) -> None:
        self.batch_slots = [object()] * slots
        self.step = step
        self.model = self
        self.clock = 0.0
        self.calls: list[tuple[int, int]] = []

    def tokenize(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    def generate_batch(self, prompts: list[list[int]], *, max_tokens: int) -> list[SimpleNamespace]:
        self.calls.append((len(prompts), max_tokens))
        self.clock += 0.5 + max_tokens * self.step(len(prompts))
        return [SimpleNamespace(tokens=[1] * max_tokens) for _ in prompts]


def test_the_curve_times_decode_steps_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = _Probe(slots=8)
    monkeypatch.setattr("fimble.batch.width.time.perf_counter", lambda: probe.clock)
    curve = measure_curve(probe)
    assert sorted(curve) == [1, 2, 4, 8]  # as many widths as batch slots
    assert curve[1] == pytest.approx(1 / 0.012) and curve[8] == pytest.approx(8 / 0.026)
    assert all(n == 1 or w in curve for w, n in probe.calls)


def test_every_width_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """One slow width is not the end of the curve (width 8 on a 2-core AVX2 machine)."""
    dip = _Probe(slots=64, step=lambda w: 0.08 if w == 8 else max(0.010, 0.0025 * w) / (2 if w == 16 else 1))
    monkeypatch.setattr("fimble.batch.width.time.perf_counter", lambda: dip.clock)
    curve = measure_curve(dip)
    assert sorted(curve) == [1, 2, 4, 8, 16, 32, 64] and knee(curve) == 16


def test_the_curve_is_kept_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIMBLE_CPU_PATH_DIR", str(tmp_path))
    measured = []

    def measure() -> Measured:
        measured.append(1)
        return Measured(dict(CURVE), 28_672)

    first = cached_curve("k", 2, measure)
    again = cached_curve("k", 2, measure)
    assert first == again == Measured(CURVE, 28_672) and measured == [1]
    cached_curve("k", 4, measure)  # other threads: measured again
    assert measured == [1, 1]
    (tmp_path / "batch-curve-k-t2.json").write_text("{torn")
    assert cached_curve("k", 2, measure).curve == CURVE and len(measured) == 3


@pytest.mark.parametrize(
    ("value", "ok"), [("auto", 0), ("AUTO", 0), ("1", 1), ("254", 254), ("0", None), ("x", None)]
)
def test_width_option_takes_auto_or_a_count(value: str, ok: int | None) -> None:
    """0 stands for auto; the command's refusal of 255 is tested beside the command."""
    from fimble.commands.batch import _Width

    width = _Width()
    if ok is not None:
        assert width.convert(value, None, None) == ok
    else:
        with pytest.raises(click.BadParameter):
            width.convert(value, None, None)
