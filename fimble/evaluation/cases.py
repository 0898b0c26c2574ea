"""The positions the served evaluation asks at: two per sampled line, in the order a user meets them.

Each sampled line (``fimble.evaluation.samples``) gives two cursor positions with the rest of the line
blanked: ``line_start`` (right after the indentation: the whole line is the truth) and ``mid_line``
(at a token boundary inside the line's code, the sample's own column when it is a mid-line sample).
Samples come file by file and line by line, as a user works down a file, so each position is
labelled by what the server has seen before it: ``cold`` (the first position in its file this
session) or ``warm`` (a later one in a file already visited). A ``revisited`` pass at the end asks
again at the first position of every file and a few others, with the same masks.

Every position is also a self-contained case (``case_record``): what another completion system
needs to answer exactly the same place (the masked file, the cursor, the truth), written to
``cases.jsonl``. Pure functions over strings, tested without a model or an index.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fimble.evaluation.crossfile import not_named_above
from fimble.evaluation.samples import Sample, mask, mid_line_column

__all__ = [
    "POSITIONS",
    "VISITS",
    "Case",
    "build_cases",
    "case_record",
    "positions_of",
    "revisit_plan",
]

POSITIONS = ("line_start", "mid_line")
VISITS = ("cold", "warm", "revisited")
_REVISIT_EXTRA = 4  # at most this many warm positions asked again besides each file's first one

Classify = Callable[[str, int, int], Iterable[str]]  # (path, line, column) -> cross-file names


@dataclass(frozen=True)
class Case:
    """One cursor position on a masked line. ``line`` is 0-based; ``column`` and ``offset`` count
    code points (``column`` in the line, ``offset`` in ``text``, the file as the server sees it)."""

    sample: str  # the sampled line's id (``Sample.id``)
    path: str  # workspace-relative, "/" separators
    language: str
    line: int
    column: int
    position: str  # one of POSITIONS
    truth: str
    text: str
    offset: int
    cross_file: tuple[str, ...] = ()
    cross_file_unseen: tuple[str, ...] = ()
    visit: str = "warm"  # cold | warm: what the server had seen of this file before this position
    ceiling: bool = False  # the position ``fimble eval --mode ceiling`` scores for this sample

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line + 1}:{self.column + 1}"


def _mid_column(sample: Sample, line: str, seed: int) -> int | None:
    """The sample's own column when it is a mid-line sample; otherwise one drawn for its line alone
    (seeded by the line, so adding samples elsewhere does not move it)."""
    if sample.kind == "mid_line":
        return sample.column
    return mid_line_column(line, random.Random(f"{seed}:{sample.path}:{sample.line}"))


def positions_of(
    sample: Sample, text: str, language: str, classify: Classify | None = None, seed: int = 0
) -> list[Case]:
    """The line-start and the mid-line position of ``sample`` in ``text`` (the file as on disk); a
    line with no token boundary to stop at mid-line gives only the line-start one."""
    line = text.split("\n")[sample.line]
    indent = len(line) - len(line.lstrip())
    columns = {"line_start": indent, "mid_line": _mid_column(sample, line, seed)}
    out: list[Case] = []
    for position in POSITIONS:
        column = columns[position]
        if column is None or (position == "mid_line" and column <= indent):
            continue
        truth = line[column:].rstrip()
        if not truth.strip():
            continue
        probe = Sample(sample.path, sample.line, column, position, truth)
        masked, offset = mask(text, probe)
        names = tuple(dict.fromkeys(classify(sample.path, sample.line, column))) if classify else ()
        out.append(
            Case(
                sample=sample.id,
                path=sample.path,
                language=language,
                line=sample.line,
                column=column,
                position=position,
                truth=truth,
                text=masked,
                offset=offset,
                cross_file=names,
                cross_file_unseen=tuple(not_named_above(names, masked[:offset])),
                ceiling=column == sample.column,
            )
        )
    return out


def build_cases(
    samples: Sequence[Sample],
    texts: dict[str, str],
    languages: dict[str, str],
    classify: Classify | None = None,
    seed: int = 0,
) -> list[Case]:
    """Every sample's positions in session order (file by file, line by line, line start before
    mid-line), each labelled ``cold`` when it is the first in its file and ``warm`` otherwise."""
    ordered = sorted(samples, key=lambda s: (s.path, s.line))
    out: list[Case] = []
    seen: set[str] = set()
    for sample in ordered:
        for case in positions_of(sample, texts[sample.path], languages[sample.path], classify, seed):
            visit = "warm" if case.path in seen else "cold"
            seen.add(case.path)
            out.append(replace(case, visit=visit))
    return out


def revisit_plan(cases: Sequence[Case], extra: int = _REVISIT_EXTRA) -> list[Case]:
    """The positions asked again at the end, in session order: every file's first (cold) position,
    and a quarter of the warm ones (at most ``extra``) spread evenly over the session. Labelled
    ``revisited``."""
    chosen = {i for i, c in enumerate(cases) if c.visit == "cold"}
    warm = [i for i, c in enumerate(cases) if c.visit == "warm"]
    take = min(max(0, extra), math.ceil(len(warm) / 4))
    chosen.update(warm[int(k * len(warm) / take)] for k in range(take))
    return [replace(cases[i], visit="revisited") for i in sorted(chosen)]


def case_record(case: Case, source: str, order: int, revisited: bool) -> dict[str, Any]:
    """One line of ``cases.jsonl``: where to ask, what the file looks like there, and the truth.

    ``text`` is the whole file as the server saw it (the line's rest blanked); the cursor is at
    ``offset`` code points into it, that is line ``line`` and column ``column`` (0-based, code
    points), so ``text[:offset]`` is the prefix and ``text[offset:]`` the suffix. ``order`` is the
    position's place in the session and ``visit`` what the server had seen of the file before it."""
    return {
        "id": case.id,
        "source": source,
        "path": case.path,
        "language": case.language,
        "line": case.line,
        "column": case.column,
        "offset": case.offset,
        "position": case.position,
        "truth": case.truth,
        "cross_file": bool(case.cross_file),
        "cross_file_names": list(case.cross_file),
        "cross_file_unseen": list(case.cross_file_unseen),
        "sample": case.sample,
        "ceiling_position": case.ceiling,
        "order": order,
        "visit": case.visit,
        "revisited": revisited,
        "text": case.text,
    }
