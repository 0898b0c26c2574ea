"""Masked-line samples from real source files: where the cursor goes and what the truth is.

A sample is one line of a real file with its end hidden: the cursor sits either right after the
indentation (the model writes the whole line) or mid-line at a token boundary (the model finishes it).
The truth is the rest of that line; the document the model sees has that rest removed, so nothing
after the cursor on the line gives it away. Pure functions over strings, testable without an index.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

__all__ = [
    "CURSOR_KINDS",
    "Sample",
    "candidate_lines",
    "choose_samples",
    "identifiers",
    "mask",
    "mid_line_column",
]

CURSOR_KINDS = ("line_start", "mid_line")

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMENT_STARTS = ("#", "//", "/*", "*", "--", '"""', "'''")
_TRIPLE = re.compile(r'"""|\'\'\'')
_MIN_CHARS, _MAX_CHARS = 6, 120


@dataclass(frozen=True)
class Sample:
    """One masked line. ``line`` is 0-based; ``column`` is the cursor's character column in it.

    ``cross_file`` names the symbols the truth's code uses that resolve, through this file's imports,
    to another workspace file (``fimble.evaluation.crossfile``): the lines repository context is
    meant to help with.
    """

    path: str  # workspace-relative, "/" separators
    line: int
    column: int
    kind: str  # one of CURSOR_KINDS
    truth: str
    cross_file: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line + 1}:{self.column + 1}"

    def with_cross_file(self, names: Iterable[str]) -> Sample:
        return replace(self, cross_file=tuple(sorted(set(names))))


def identifiers(text: str) -> list[str]:
    """Identifiers in order of appearance (names inside strings count too: what the model must type)."""
    return _IDENT.findall(text)


def _code_lines(text: str) -> Iterable[tuple[int, str]]:
    """(index, line) of lines outside triple-quoted strings (a line-based approximation: docstrings
    are prose the index does not help with, and their "truth" is not code)."""
    inside = False
    for i, line in enumerate(text.split("\n")):
        quotes = len(_TRIPLE.findall(line))
        if inside or quotes:
            if quotes % 2:
                inside = not inside
            continue
        yield i, line


def candidate_lines(text: str) -> list[int]:
    """Lines worth masking: code (no blank, comment or docstring lines) of a typeable length with at
    least one identifier of three characters or more (so ``)`` or ``else:`` are left out)."""
    out: list[int] = []
    for i, line in _code_lines(text):
        body = line.strip()
        if not (_MIN_CHARS <= len(body) <= _MAX_CHARS) or body.startswith(_COMMENT_STARTS):
            continue
        if not any(len(name) >= 3 for name in identifiers(body)):
            continue
        out.append(i)
    return out


def mid_line_column(line: str, rng: random.Random) -> int | None:
    """A cursor column inside ``line``'s code at a token boundary (after a space, ``.``, ``(``, ``=``,
    ``,`` or ``[``), leaving at least three characters to complete; None when there is none."""
    indent = len(line) - len(line.lstrip())
    end = len(line.rstrip())
    spots = [
        c
        for c in range(indent + 2, end - 2)
        if line[c - 1] in " .(=,[" and not line[c].isspace() and line[indent:c].strip()
    ]
    return rng.choice(spots) if spots else None


def mask(text: str, sample: Sample) -> tuple[str, int]:
    """The document as the model sees it (the rest of the masked line removed) and the cursor offset."""
    lines = text.split("\n")
    kept = lines[sample.line][: sample.column]
    before = "\n".join(lines[: sample.line])
    head = before + ("\n" if sample.line else "") + kept
    after = lines[sample.line + 1 :]
    return head + ("\n" + "\n".join(after) if after else ""), len(head)


def _make(path: str, lines: Sequence[str], i: int, kind: str, rng: random.Random) -> Sample | None:
    line = lines[i]
    if kind == "line_start":
        column: int | None = len(line) - len(line.lstrip())
    else:
        column = mid_line_column(line, rng)
    if column is None:
        return None
    truth = line[column:].rstrip()
    return Sample(path, i, column, kind, truth) if truth.strip() else None


def choose_samples(
    files: Sequence[tuple[str, str]],
    n: int,
    *,
    seed: int = 0,
    classify: Callable[[Sample], Iterable[str]] | None = None,
    cross_share: float = 0.5,
) -> list[Sample]:
    """``n`` samples drawn at random (seeded) from ``files`` as (path, text), alternately at line
    starts and mid-line, returned in file and line order (consecutive samples of one file share most
    of their prompt, as when a user works down a file).

    ``classify`` names a sample's symbols defined in other files; then about ``cross_share`` of the
    samples are such cross-file lines (they are rarer than the others, and they are what repository
    context is for), the rest are not.
    """
    rng = random.Random(seed)
    pool = [(path, i) for path, text in files for i in candidate_lines(text)]
    rng.shuffle(pool)
    split = {path: text.split("\n") for path, text in files}
    want_cross = round(n * cross_share) if classify is not None else 0
    cross: list[Sample] = []
    other: list[Sample] = []
    spare: list[Sample] = []
    for k, (path, i) in enumerate(pool):
        if len(cross) >= want_cross and len(other) >= n - want_cross:
            break
        sample = _make(path, split[path], i, CURSOR_KINDS[k % 2], rng)
        if sample is None:
            continue
        names = tuple(classify(sample)) if classify is not None else ()
        if names:
            sample = sample.with_cross_file(names)
            (cross if len(cross) < want_cross else spare).append(sample)
        elif len(other) < n - want_cross:
            other.append(sample)
    chosen = cross + other + spare[: max(0, n - len(cross) - len(other))]
    return sorted(chosen[:n], key=lambda s: (s.path, s.line))
