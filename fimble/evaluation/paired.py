"""How sure a context effect is: the same masked lines answered with and without repository context.

A 40-line run moves by 2.5 points when one line flips, and greedy decoding with KV reuse flips about
one line per run. Exact match without and with context is therefore not enough to act on; the report
also says which lines context won and lost, an exact sign test on those (McNemar's test, the one for
paired yes/no outcomes), and a bootstrap interval of the relative change over resampled lines.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PairedEffect", "paired_effect", "sign_test"]

_RESAMPLES = 2000
_LEVEL = 0.95


@dataclass(frozen=True)
class PairedEffect:
    """Exact match on lines answered both ways, and how far to trust the difference."""

    n: int
    without: float | None
    with_: float | None
    relative_change: float | None
    won: int  # right with context only
    lost: int  # right without context only
    p_value: float | None  # two-sided exact sign test on won vs lost
    interval: tuple[float, float] | None  # 95% bootstrap interval of relative_change

    def as_dict(self) -> dict[str, Any]:
        out = {("with" if k == "with_" else k): v for k, v in asdict(self).items()}
        out["interval"] = list(self.interval) if self.interval else None
        return out


def sign_test(won: int, lost: int) -> float | None:
    """Two-sided exact binomial test of ``won`` against ``lost`` at even odds (ties dropped)."""
    n = won + lost
    if n == 0:
        return None
    tail = sum(math.comb(n, k) for k in range(min(won, lost) + 1)) / 2**n
    return float(f"{min(1.0, 2 * tail):.3g}")  # (significant digits: 2e-9 must not read as 0)


def _relative(off: int, on: int) -> float | None:
    return None if off == 0 else (on - off) / off


def paired_effect(pairs: Sequence[tuple[bool, bool]], *, seed: int = 0) -> PairedEffect:
    """Effect of context over ``pairs`` of (exact without, exact with) for the same lines.

    The interval resamples lines, not runs: it says how much the number depends on which lines were
    drawn. Resamples with no line right without context have no relative change and are left out;
    the interval is omitted when a tenth of them are (too few lines right to divide by)."""
    n = len(pairs)
    if n == 0:
        return PairedEffect(0, None, None, None, 0, 0, None, None)
    off = sum(a for a, _ in pairs)
    on = sum(b for _, b in pairs)
    won = sum(1 for a, b in pairs if b and not a)
    lost = sum(1 for a, b in pairs if a and not b)
    rel = _relative(off, on)
    rng = random.Random(seed)
    changes: list[float] = []
    for _ in range(_RESAMPLES):
        draw = [pairs[rng.randrange(n)] for _ in range(n)]
        change = _relative(sum(a for a, _ in draw), sum(b for _, b in draw))
        if change is not None:
            changes.append(change)
    interval = None
    if len(changes) >= 0.9 * _RESAMPLES:
        changes.sort()
        tail = (1 - _LEVEL) / 2
        lo = changes[int(tail * (len(changes) - 1))]
        hi = changes[math.ceil((1 - tail) * (len(changes) - 1))]
        interval = (round(lo, 3), round(hi, 3))
    return PairedEffect(
        n=n,
        without=round(off / n, 4),
        with_=round(on / n, 4),
        relative_change=None if rel is None else round(rel, 3),
        won=won,
        lost=lost,
        p_value=sign_test(won, lost),
        interval=interval,
    )
