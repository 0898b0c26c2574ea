"""Which prompt tokens the KV cache already holds, and where: a pure planner over token ids.

A keystroke on the cursor's line changes a few tokens in the middle of a FIM prompt (the end of the
prefix); everything after them (the suffix, the middle token) is unchanged but sits one or two
positions further right. Evaluating it again costs ~10 ms a token on a 2-core CPU; moving its cached
KV costs nearly nothing. The planner finds the common prefix and then the runs of the new prompt that
the cache holds elsewhere, so the engine evaluates only what is really new.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Chunk", "ReusePlan", "plan_reuse"]


@dataclass(frozen=True)
class Chunk:
    """Cached tokens ``[src, src+n)`` reused as prompt tokens ``[dst, dst+n)``."""

    src: int
    dst: int
    n: int

    @property
    def shift(self) -> int:
        return self.dst - self.src


@dataclass(frozen=True)
class ReusePlan:
    head: int  # prompt[:head] == cached[:head], kept in place
    chunks: tuple[Chunk, ...]  # in increasing src and dst order, non-overlapping
    cached_len: int

    def missing(self, n_prompt: int) -> list[int]:
        """Prompt positions that must be evaluated, in increasing order."""
        covered = [False] * n_prompt
        for i in range(self.head):
            covered[i] = True
        for c in self.chunks:
            for i in range(c.dst, c.dst + c.n):
                covered[i] = True
        return [i for i, done in enumerate(covered) if not done]

    def gaps(self) -> list[tuple[int, int]]:
        """Cache position ranges ``[p0, p1)`` to drop: everything neither in the head nor a chunk."""
        out: list[tuple[int, int]] = []
        start = self.head
        for c in self.chunks:
            if c.src > start:
                out.append((start, c.src))
            start = c.src + c.n
        if start < self.cached_len:
            out.append((start, self.cached_len))
        return out

    @property
    def reused(self) -> int:
        return self.head + sum(c.n for c in self.chunks)


def plan_reuse(
    cached: Sequence[int],
    prompt: Sequence[int],
    min_chunk: int,
    limit: int | None = None,
    *,
    lines_to: int | None = None,
    lines_min_chunk: int = 64,
    source_end: int | None = None,
) -> ReusePlan:
    """Plan how to turn the cache holding ``cached`` into one holding ``prompt``.

    The last prompt token is never reused (its logits are needed). Chunks are only taken from
    ``prompt[:limit]``: tokens whose meaning depends on what precedes them must not be moved. In a
    FIM prompt that is everything from the prefix token on: measured with Qwen2.5-Coder, a suffix
    whose KV was computed before a keystroke still "remembers" the old cursor (``    r|`` typed on to
    ``    return |`` completes ``eturn a + b``). ``min_chunk`` <= 0 disables chunk reuse. Greedy left
    to right: good enough for the edits typing makes, and linear in the prompt length.

    ``lines_to`` lets ``prompt[limit:lines_to]`` (the file's lines above the cursor) take chunks
    too, of at least ``lines_min_chunk`` tokens: after a jump down a file, the lines both prompts
    show sit further left (the prefix's first line moved down), and their KV, computed from what
    came before them only, is nearly theirs; llama-server's ``--cache-reuse`` moves such runs the
    same way. Runs that long rarely repeat by chance, so a run of code that recurs elsewhere is not
    taken from the wrong place. Lines only move left: their KV then saw at least as much before it
    as it now has. Moved right, from a first prompt (a few lines and little context before them)
    into the full prompt at the same place, the lines' KV lacked what the full prompt reads for,
    and 14 of 31 served answers changed. ``source_end`` bounds where any chunk may come from:
    ``cached[:source_end]`` (the old prompt's suffix and generated tokens remember the old cursor).
    """
    last = len(prompt) - 1 if limit is None else min(len(prompt) - 1, limit)
    head = 0
    end = min(len(cached), len(prompt) - 1)
    while head < end and cached[head] == prompt[head]:
        head += 1
    near_end = last
    if lines_to is not None and limit is not None and lines_min_chunk > 0:
        last = max(last, min(len(prompt) - 1, lines_to))
    if min_chunk <= 0 or head >= last:
        return ReusePlan(head, (), len(cached))
    src_end = len(cached) if source_end is None else max(head, min(len(cached), source_end))
    near = _index(cached, head, src_end, min_chunk) if head < near_end else {}
    far = _index(cached, head, src_end, lines_min_chunk) if last > near_end else {}
    chunks: list[Chunk] = []
    i, j = head, head
    while i < last:
        width = min_chunk if i < near_end else lines_min_chunk
        if i + width > last:
            if i < near_end:  # the context's end: the lines after it may still have a long run
                i = near_end
                continue
            break
        index, lowest = (near, j) if i < near_end else (far, max(j, i))
        found = next((p for p in index.get(tuple(prompt[i : i + width]), ()) if p >= lowest), None)
        if found is None:
            i += 1
            continue
        n = width
        while i + n < last and found + n < src_end and cached[found + n] == prompt[i + n]:
            n += 1
        chunks.append(Chunk(found, i, n))
        i += n
        j = found + n
    return ReusePlan(head, tuple(chunks), len(cached))


def _index(cached: Sequence[int], start: int, end: int, width: int) -> dict[tuple[int, ...], list[int]]:
    """Where each run of ``width`` tokens of ``cached[start:end]`` starts, in increasing order."""
    index: dict[tuple[int, ...], list[int]] = {}
    for j in range(start, end - width + 1):
        index.setdefault(tuple(cached[j : j + width]), []).append(j)
    return index
