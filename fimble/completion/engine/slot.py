"""One KV sequence of the context (a slot): the tokens whose KV it holds, and the moves that keep it useful.

A slot is llama.cpp server's idea: the context's KV cells belong to numbered sequences, and each slot
remembers, position by position, which token's KV its sequence holds (``cells``; -1 marks a hole left
while a plan is applied). From that record it plans what a new prompt can reuse (``kvplan``), drops
and shifts cells to match, parks moved chunks in another sequence while the tokens before them are
evaluated, and copies its KV to and from the disk store (``kvstore``).

It never decodes: evaluation is handed a ``decode`` function (``Decoder.decode_at``), and the KV cells
are reached through ``KVMemory``, so its bookkeeping is tested without a model (``tests/fakes.py``).
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from fimble.completion.engine.kvplan import Chunk, ReusePlan, plan_reuse
from fimble.completion.engine.kvstore import KVEntry, KVStore

__all__ = ["Decode", "KVMemory", "LlamaMemory", "Slot"]

log = logging.getLogger(__name__)

# Evaluates (position, token) cells of a slot in increasing position order; logits for the last if asked.
Decode = Callable[["Slot", Sequence[tuple[int, int]], bool], None]


class KVMemory(Protocol):
    """The KV-cell operations a slot needs (llama.cpp's ``llama_memory_*`` and sequence state).

    Positions are ``[p0, p1)``; a negative ``p0`` means 0 and a negative ``p1`` the end."""

    can_shift: bool

    def rm(self, seq: int, p0: int, p1: int) -> None: ...
    def add(self, seq: int, p0: int, p1: int, delta: int) -> None: ...
    def cp(self, src: int, dst: int, p0: int, p1: int) -> None: ...
    def clear(self) -> None: ...
    def state_get(self, seq: int) -> memoryview | None: ...
    def state_set(self, seq: int, blob: Any) -> bool: ...


class LlamaMemory:
    """``KVMemory`` over a llama.cpp context."""

    def __init__(self, ll: Any, ctx: Any) -> None:
        self._ll = ll
        self._ctx = ctx
        self._mem = ll.llama_get_memory(ctx)
        self.can_shift = bool(ll.llama_memory_can_shift(self._mem))

    def rm(self, seq: int, p0: int, p1: int) -> None:
        self._ll.llama_memory_seq_rm(self._mem, seq, p0, p1)

    def add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        self._ll.llama_memory_seq_add(self._mem, seq, p0, p1, delta)

    def cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self._ll.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def clear(self) -> None:
        self._ll.llama_memory_clear(self._mem, True)

    def state_get(self, seq: int) -> memoryview | None:
        size = self._ll.llama_state_seq_get_size(self._ctx, seq)
        buf = (ctypes.c_uint8 * size)()
        got = self._ll.llama_state_seq_get_data(self._ctx, buf, size, seq)
        return memoryview(buf).cast("B")[:got] if got else None

    def state_set(self, seq: int, blob: Any) -> bool:
        buf = (ctypes.c_uint8 * len(blob)).from_buffer(blob)
        try:
            return bool(self._ll.llama_state_seq_set_data(self._ctx, buf, len(blob), seq))
        finally:
            del buf


class Slot:
    """One KV sequence and the record of what it holds.

    ``park`` is the sequence this slot parks moved chunks in and copies snapshots through; it must be
    empty whenever the slot is not inside ``evaluate`` or ``snapshot`` (the interactive slot uses
    sequence 1; batch slots move nothing and have none).
    """

    def __init__(
        self,
        kv: KVMemory,
        seq_id: int,
        *,
        park: int | None = None,
        reuse_min_chunk: int = 8,
        restore_min_gain: int = 32,
        fim_marks: tuple[int, int] | None = None,
        lines_min_chunk: int = 64,
    ) -> None:
        self.kv = kv
        self.seq_id = seq_id
        self.park = park
        self.cells: list[int] = []  # the tokens whose KV sits in this sequence, in position order
        self.reuse_min_chunk = reuse_min_chunk if kv.can_shift else 0
        # The model's FIM prefix and suffix token ids: where a prompt's lines above the cursor
        # start and end, so that they too may be moved after a jump down (``plan``).
        self.fim_marks = fim_marks
        self.lines_min_chunk = lines_min_chunk
        self.restore_min_gain = restore_min_gain
        self.store: KVStore | None = None  # saved states on disk (``Engine.attach_store``)
        self.tokens_shifted = 0  # KV cells moved instead of evaluated, since load (for status/bench)
        self.tokens_restored = 0  # KV cells read back from disk instead of evaluated, since load
        self.last_restore: dict[str, float] = {}  # tokens and ms of the last state read back

    def __repr__(self) -> str:
        return f"Slot(seq={self.seq_id}, cells={len(self.cells)})"

    # -- the record -----------------------------------------------------------------------------

    def clear(self) -> None:
        """Drop every cell of this sequence (other sequences keep theirs)."""
        self.kv.rm(self.seq_id, -1, -1)
        self.cells = []

    def record(self, cells: Sequence[tuple[int, int]]) -> None:
        """Note (position, token) cells just evaluated into this sequence."""
        for pos, tok in cells:
            if pos == len(self.cells):
                self.cells.append(tok)
            else:
                self.cells[pos] = tok

    def truncate(self, n: int) -> None:
        """Drop the cells from position ``n`` on (and from a hole before ``n``: nothing after it is valid)."""
        self.kv.rm(self.seq_id, n, -1)
        del self.cells[n:]
        if -1 in self.cells:  # a hole left by an unfinished evaluation
            self.truncate(self.cells.index(-1))

    def stable_head(self, n: int) -> list[int]:
        """The first ``n`` recorded tokens, up to the first hole."""
        head = self.cells[:n]
        return head[: head.index(-1)] if -1 in head else head

    # -- reuse ----------------------------------------------------------------------------------

    def plan(self, prompt: Sequence[int], reuse_limit: int = 0) -> ReusePlan:
        """``reuse_limit``: see ``Engine.prepare``. Where ``prompt[reuse_limit]`` is the FIM prefix
        token, the file's lines after it (up to the suffix token) may be moved left too, taken from
        the cached prompt's lines before its own suffix token (``plan_reuse``'s ``lines_to``)."""
        lines_to = source_end = None
        marks = self.fim_marks
        if marks is not None and self.lines_min_chunk > 0 and 0 < reuse_limit < len(prompt):
            pre, suf = marks
            if prompt[reuse_limit] == pre:
                lines_to = _find(prompt, suf, reuse_limit)
                source_end = _find(self.cells, suf, 0)
        return plan_reuse(
            self.cells,
            prompt,
            self.reuse_min_chunk,
            limit=reuse_limit,
            lines_to=lines_to,
            lines_min_chunk=self.lines_min_chunk,
            source_end=source_end,
        )

    def apply(self, plan: ReusePlan, prompt: Sequence[int]) -> None:
        """Drop what the plan does not keep and move reused chunks to their new positions."""
        seq = self.seq_id
        for p0, p1 in reversed(plan.gaps()):
            self.kv.rm(seq, p0, p1 if p1 < plan.cached_len else -1)
        # Right shifts from the last chunk, then left shifts from the first: no two runs ever collide.
        for c in reversed(plan.chunks):
            if c.shift > 0:
                self.kv.add(seq, c.src, c.src + c.n, c.shift)
        for c in plan.chunks:
            if c.shift < 0:
                self.kv.add(seq, c.src, c.src + c.n, c.shift)
        # The record now has holes where tokens are still to be evaluated; -1 never matches a token.
        cells = [-1] * len(prompt)
        cells[: plan.head] = prompt[: plan.head]
        for c in plan.chunks:
            cells[c.dst : c.dst + c.n] = prompt[c.dst : c.dst + c.n]
        self.cells = cells
        self.tokens_shifted += sum(c.n for c in plan.chunks if c.shift)

    def evaluate(
        self, prompt: Sequence[int], missing: list[int], chunks: Sequence[Chunk], decode: Decode
    ) -> None:
        """Evaluate the missing positions while moved chunks sit after some of them.

        llama.cpp only accepts tokens at the position right after everything their sequence already
        holds. So chunks that lie after the first missing position are parked in ``park`` (invisible
        to this sequence), and each is brought back just before the first missing token that follows
        it. This costs one extra decode call per chunk boundary (~one weight pass), far less than
        evaluating the chunk again.
        """
        kv, seq = self.kv, self.seq_id
        first = missing[0]
        parked = [c for c in chunks if c.dst > first]
        if parked and self.park is None:
            raise ValueError(f"slot {seq} has no sequence to park moved chunks in")
        park = self.park if self.park is not None else seq
        for c in parked:
            kv.cp(seq, park, c.dst, c.dst + c.n)
            kv.rm(seq, c.dst, c.dst + c.n)
        try:
            group: list[tuple[int, int]] = []
            for pos in missing:
                if parked and parked[0].dst < pos:
                    if group:
                        decode(self, group, False)
                        group = []
                    while parked and parked[0].dst < pos:
                        c = parked.pop(0)
                        kv.cp(park, seq, c.dst, c.dst + c.n)
                        kv.rm(park, c.dst, c.dst + c.n)
                group.append((pos, prompt[pos]))
            decode(self, group, True)
        finally:
            # On a cancel or failure, chunks still parked are dropped along with what follows them.
            if parked:
                kv.rm(park, -1, -1)
                self.truncate(parked[0].dst)

    def prepare(self, prompt: Sequence[int], decode: Decode, reuse_limit: int = 0) -> tuple[int, int]:
        """Make this sequence hold ``prompt``, reading a saved state back when that spares enough;
        returns (tokens reused, tokens evaluated). See ``Engine.prepare``."""
        if self.store is not None:
            self.restore_if_better(prompt, reuse_limit)
        plan = self.plan(prompt, reuse_limit)
        self.apply(plan, prompt)
        missing = plan.missing(len(prompt))
        self.evaluate(prompt, missing, plan.chunks, decode)
        return len(prompt) - len(missing), len(missing)

    def evaluation_cost(self, prompt: Sequence[int], reuse_limit: int = 0) -> int:
        """How many tokens ``prepare(prompt)`` would evaluate, counting a state it would read back."""
        reused = self.plan(prompt, reuse_limit).reused
        if self.store is not None and (hit := self.store.match(prompt)) is not None:
            reused = max(reused, min(hit[1], len(prompt) - 1))
        return len(prompt) - reused

    # -- KV state on disk -----------------------------------------------------------------------

    def restore_if_better(self, prompt: Sequence[int], reuse_limit: int) -> None:
        """Replace the cache with the saved state sharing the longest prefix with ``prompt``, when
        that spares at least ``restore_min_gain`` evaluations over what the cache can reuse."""
        assert self.store is not None
        hit = self.store.match(prompt)
        if hit is None:
            return
        entry, n = hit
        n = min(n, len(prompt) - 1)
        gain = self.restore_min_gain
        head = 0
        for a, b in zip(self.cells, prompt, strict=False):
            if a != b:
                break
            head += 1
        if n < head + gain:
            return
        if n < self.plan(prompt, reuse_limit).reused + gain:
            return
        self.restore(entry)

    def restore(self, entry: KVEntry) -> bool:
        """Load a saved state into this sequence (replacing the cache); False when it is unusable.

        The whole context is cleared first, so the state is read into one run of free cells: only the
        interactive slot restores, and between its requests no other sequence holds cells."""
        assert self.store is not None
        t0 = time.perf_counter()
        blob = self.store.read(entry)
        if blob is None:
            return False
        self.kv.clear()
        self.cells = []
        if not self.kv.state_set(self.seq_id, blob):
            self.kv.clear()
            self.store.forget(entry, "llama.cpp refused it")
            return False
        self.cells = [int(t) for t in entry.tokens]
        self.tokens_restored += entry.n_tokens
        self.last_restore = {"tokens": entry.n_tokens, "ms": round((time.perf_counter() - t0) * 1000, 1)}
        log.debug("read back %d tokens of KV state in %.0f ms", entry.n_tokens, self.last_restore["ms"])
        return True

    def snapshot(self, n: int) -> tuple[list[int], memoryview] | None:
        """Copy the KV of the first ``n`` cached tokens out of llama.cpp (None: nothing to copy).

        The parking sequence (free between requests; ``evaluate`` parks chunks there only while it
        runs) gets a metadata-only copy of positions [0, n) of this one, and that sequence is
        serialized: the suffix and generated tokens after the stable head are not worth keeping.
        """
        head = self.stable_head(n)
        if not head or self.park is None:
            return None
        kv, park = self.kv, self.park
        kv.rm(park, -1, -1)
        kv.cp(self.seq_id, park, 0, len(head))
        try:
            data = kv.state_get(park)
        finally:
            kv.rm(park, -1, -1)
        return None if data is None else (head, data)

    def save_state(self, n: int, *, wait: bool, slack: int, file_start: int | None) -> bool:
        """See ``Engine.save_state``."""
        if self.store is None:
            return False
        head = self.stable_head(n)
        if len(head) < self.restore_min_gain or self.store.covered(head, slack=slack):
            return False
        snap = self.snapshot(len(head))
        if snap is None:
            return False
        if wait:
            return self.store.save(*snap, file_start) is not None
        self.store.save_async(*snap, file_start)
        return True


def _find(tokens: Sequence[int], token: int, start: int) -> int:
    """The first position of ``token`` in ``tokens`` from ``start`` on, or ``len(tokens)``."""
    try:
        return tokens.index(token, start)
    except ValueError:
        return len(tokens)
