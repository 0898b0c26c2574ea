"""Shared prompt heads of a batch: which prompts begin alike, and how many KV cells they really hold.

Requests cut from one file (several cursor positions, a docstring per def, an evaluation's lines)
give FIM prompts that begin with the same tokens: the repository context and the file from its
start down to the earliest cursor. Evaluating that head once and copying its KV cells to the other
sequences (``llama_memory_seq_cp``) spares all but one evaluation of it; in the unified KV buffer
a copied cell is the same cell, now tagged with one more sequence, so it costs no memory either.

Pure functions over token ids plus a small record of which sequences share which cells, so the
batch loop's bookkeeping is tested without a model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = ["MIN_HEAD", "CellCount", "admission_order", "shared_head"]

# A shared head shorter than this is evaluated again rather than copied: a copy saves little then,
# and it ties the sequence to another one's cells.
MIN_HEAD = 32


def shared_head(cells: Sequence[int], prompt: Sequence[int]) -> int:
    """How many leading tokens of ``prompt`` the KV cells ``cells`` hold (position by position),
    short of the prompt's last token: that one is always evaluated, its logits choose the first
    generated token.

    A binary search over slice comparisons (run in C): the batch asks this of every slot for every
    prompt it admits, and prompts run to thousands of tokens."""
    n = min(len(cells), len(prompt) - 1)
    lo, hi = 0, max(0, n)  # cells[:lo] == prompt[:lo]; the answer is at most hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if list(cells[lo:mid]) == list(prompt[lo:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo


def admission_order(prompts: Sequence[Sequence[int]]) -> list[int]:
    """Indices of ``prompts`` in the order the batch takes them: sorted by their tokens, so prompts
    sharing a head are neighbours (in sorted order the longest head any prompt shares with another
    is the one it shares with a neighbour) and are decoded while the head's cells are still held."""
    return sorted(range(len(prompts)), key=lambda i: list(prompts[i]))


class CellCount:
    """The KV cells the batch sequences hold, a copied cell counted once however many hold it.

    Each sequence's cells get ids in position order; ``sync`` mirrors a slot's record after
    llama.cpp evaluated (new cells) or dropped (truncate, clear) some, and ``copy`` shares a source's
    first cells with a sequence, as ``llama_memory_seq_cp`` does in a unified KV buffer. A cell is
    free again when no sequence holds it."""

    def __init__(self) -> None:
        self._ids: dict[int, list[int]] = {}
        self._refs: Counter[int] = Counter()
        self._next = 0

    @property
    def used(self) -> int:
        return len(self._refs)

    def held(self, seq: int) -> int:
        return len(self._ids.get(seq, ()))

    def sync(self, seq: int, n: int) -> None:
        """Sequence ``seq`` now holds ``n`` cells: the ones past ``n`` are gone, new ones are its own."""
        ids = self._ids.setdefault(seq, [])
        for cell in ids[n:]:
            self._unref(cell)
        del ids[n:]
        while len(ids) < n:
            ids.append(self._next)
            self._refs[self._next] += 1
            self._next += 1

    def copy(self, src: int, dst: int, n: int) -> None:
        """``dst`` (empty) now shares the first ``n`` cells of ``src``."""
        assert not self._ids.get(dst), f"sequence {dst} is not empty"
        shared = self._ids.get(src, [])[:n]
        assert len(shared) == n, f"sequence {src} holds fewer than {n} cells"
        self._ids[dst] = list(shared)
        self._refs.update(shared)

    def _unref(self, cell: int) -> None:
        self._refs[cell] -= 1
        if self._refs[cell] <= 0:
            del self._refs[cell]
