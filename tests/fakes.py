"""Honest fakes of the engine, for tests that need no model.

``FakeEngine`` meets ``fimble.completion.engine.CompletionEngine`` (the interface the completer uses,
checked in ``tests/completion/test_engine_api.py``): one token per character, a scripted reply, the
stop, cancel and streaming rules of the real engines, and a cache record that keeps what it was last
asked and answered, as the local engine's interactive slot does.

``FakeKV`` stands in for llama.cpp's KV cells under ``fimble.completion.engine.slot``: per-sequence
cells with positions, and llama.cpp's rule that tokens are only taken at the position right after
everything their sequence holds. ``FakeKV.decode`` is a ``Decode`` for ``Slot.prepare``.

``FakeDecoder`` is the part of ``Decoder`` the batch loop (``fimble.completion.engine.batch``) uses,
over a ``FakeKV``: rows of several sequences per call, and a model whose next token is a function of
the tokens its sequence holds (so a wrongly copied head changes the answer).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fimble.completion.engine import Generation
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.prompt.fim import FimTokens
from fimble.errors import Cancelled

__all__ = ["FAKE_FIM", "FakeDecoder", "FakeEngine", "FakeKV"]

# Fake control-token ids, far above any character code the fake tokenizer produces.
FAKE_FIM = FimTokens(
    family="qwen",
    prefix=1_000_001,
    suffix=1_000_002,
    middle=1_000_003,
    repo_name=1_000_004,
    file_sep=1_000_005,
)
_NAMES = {
    FAKE_FIM.prefix: "<PRE>",
    FAKE_FIM.suffix: "<SUF>",
    FAKE_FIM.middle: "<MID>",
    FAKE_FIM.repo_name: "<REPO>",
    FAKE_FIM.file_sep: "<SEP>",
}


@dataclass
class FakeEngine:
    """A scripted engine: one token per character, ``reply`` (or ``reply_for(prompt text)``) as output.

    ``delay`` seconds per token make generations slow enough to queue, cancel and disconnect from.
    Every prompt it saw is kept, decoded, in ``prompts``.
    """

    reply: str = "return 42"
    delay: float = 0.0
    n_ctx: int = 4096
    fim: FimTokens = FAKE_FIM
    prompts: list[str] = field(default_factory=list)
    reply_for: Callable[[str], str] | None = None
    cancelled: int = 0
    started: threading.Event = field(default_factory=threading.Event)
    model_path: Path = Path("fake.gguf")
    load_ms: float = 0.0
    tokens_shifted: int = 0
    cached: list[int] = field(default_factory=list)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return "".join(_NAMES.get(t) or chr(t) for t in tokens)

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        return tuple(self.cached)

    def reset(self) -> None:
        self.cached = []

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int = 64,
        stop: Callable[[str], tuple[str, int] | None] | None = None,
        cancel: CancelToken | None = None,
        on_text: Callable[[str], None] | None = None,
        reuse_limit: int = 0,
        guide: object = None,
    ) -> Generation:
        reused = 0
        while reused < min(len(self.cached), len(prompt) - 1) and self.cached[reused] == prompt[reused]:
            reused += 1
        text_prompt = self.detokenize(prompt)
        self.prompts.append(text_prompt)
        self.started.set()
        reply = self.reply_for(text_prompt) if self.reply_for else self.reply
        text, reason, n = "", "max_tokens", 0
        for ch in reply:
            if n >= max_tokens:
                break
            if cancel is not None and cancel.cancelled:
                reason = "cancelled"
                self.cancelled += 1
                break
            if self.delay:
                time.sleep(self.delay)
            text += ch
            n += 1
            if stop is not None and (hit := stop(text)) is not None:
                reason, keep = hit
                text = text[:keep]
                break
            if on_text is not None:
                on_text(text)
        else:
            reason = "eog" if n < max_tokens else "max_tokens"
        self.cached = [*prompt, *self.tokenize(text)]
        evaluated = len(prompt) - reused
        return Generation(text, tuple(range(n)), reason, len(prompt), evaluated, reused, 1.0, 1.0)

    def close(self) -> None:
        pass


class FakeKV:
    """llama.cpp's KV cells as ``Slot`` sees them: ``seqs[seq][pos] = token``.

    ``decode`` refuses tokens that do not continue their sequence (llama.cpp: "it is required that the
    sequence positions remain consecutive"), so a slot that forgets to park a chunk fails here as it
    would on the model. ``abort_at``: a decode holding this position is aborted (cells from its
    first position on dropped, ``Cancelled`` raised), as a cancelled long evaluation is.
    """

    def __init__(self, can_shift: bool = True) -> None:
        self.can_shift = can_shift
        self.seqs: dict[int, dict[int, int]] = {}
        self.decodes: list[list[tuple[int, int]]] = []
        self.states: dict[int, list[tuple[int, int]]] = {}  # blob id -> cells, for state_get/set
        self.abort_at: int | None = None
        self.copies: list[tuple[int, int, int, int]] = []  # cp calls: (src, dst, p0, p1)

    def held(self, seq: int) -> dict[int, int]:
        return self.seqs.setdefault(seq, {})

    def tokens(self, seq: int) -> list[int]:
        """The sequence's tokens in position order (checking it holds one run from position 0)."""
        cells = self.held(seq)
        assert sorted(cells) == list(range(len(cells))), f"sequence {seq} has holes: {sorted(cells)}"
        return [cells[p] for p in range(len(cells))]

    @staticmethod
    def _range(p0: int, p1: int) -> Callable[[int], bool]:
        lo = 0 if p0 < 0 else p0
        return lambda p: p >= lo and (p1 < 0 or p < p1)

    def rm(self, seq: int, p0: int, p1: int) -> None:
        inside = self._range(p0, p1)
        cells = self.held(seq)
        for p in [p for p in cells if inside(p)]:
            del cells[p]

    def add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        inside = self._range(p0, p1)
        cells = self.held(seq)
        moved = {p: t for p, t in cells.items() if inside(p)}
        for p in moved:
            del cells[p]
        for p, t in moved.items():
            assert p + delta not in cells, f"shift onto a held cell {p + delta} of sequence {seq}"
            cells[p + delta] = t

    def cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self.copies.append((src, dst, p0, p1))
        inside = self._range(p0, p1)
        self.held(dst).update({p: t for p, t in self.held(src).items() if inside(p)})

    def clear(self) -> None:
        self.seqs.clear()

    def state_get(self, seq: int) -> memoryview | None:
        cells = sorted(self.held(seq).items())
        if not cells:
            return None
        key = len(self.states)
        self.states[key] = cells
        return memoryview(bytearray([key]))

    def state_set(self, seq: int, blob: Any) -> bool:
        cells = self.states.get(bytes(blob)[0])
        if cells is None:
            return False
        self.held(seq).update(cells)
        return True

    def decode(self, slot: Any, cells: Sequence[tuple[int, int]], logits: bool = True) -> None:
        """Evaluate (position, token) cells into ``slot``'s sequence, as ``Decoder.decode_at`` does."""
        held = self.held(slot.seq_id)
        expected = max(held, default=-1) + 1
        positions = [p for p, _ in cells]
        assert positions == list(range(expected, expected + len(cells))), (
            f"sequence {slot.seq_id} holds up to {expected - 1}; got positions {positions}"
        )
        self.decodes.append(list(cells))
        if self.abort_at is not None and self.abort_at in positions:
            slot.truncate(positions[0])
            raise Cancelled("cancelled during prompt evaluation")
        held.update(cells)
        slot.record(cells)


class _FakeModel:
    """The model side of ``FakeDecoder``: the next token after a sequence's cells is a hash of them."""

    def __init__(self, n_ctx: int) -> None:
        self.n_ctx = n_ctx
        self.choices: list[tuple[int, float]] = []  # per row of the last call

    @staticmethod
    def next_token(held: Sequence[int]) -> int:
        return 500 + sum((i + 1) * t for i, t in enumerate(held)) % 97

    def top2(self, row: int = -1) -> tuple[int, float]:
        return self.choices[row]

    def ends(self, token: int) -> bool:
        return False

    def piece(self, token: int) -> bytes:
        return b"x"


@dataclass
class FakeDecoder:
    """``Decoder.decode_rows`` over a ``FakeKV``, with llama.cpp's positions rule; every call's rows
    are kept in ``calls`` as (seq, pos, token). ``cancel_after``: that many calls succeed, then the
    next is aborted (``cancel`` set, return code 2), as the abort callback does."""

    kv: FakeKV
    n_ctx: int = 4096
    n_batch: int = 512
    calls: list[list[tuple[int, int, int]]] = field(default_factory=list)
    cancel: CancelToken | None = None
    cancel_after: int | None = None

    def __post_init__(self) -> None:
        from fimble.completion.engine import EngineConfig

        self.model = _FakeModel(self.n_ctx)
        self.config = EngineConfig(n_batch=self.n_batch, n_ctx=self.n_ctx)

    def decode_rows(self, rows: Sequence[tuple[Any, int, int, bool]], *, armed: bool = False) -> int:
        assert 0 < len(rows) <= self.n_batch
        if self.cancel_after is not None and len(self.calls) >= self.cancel_after and self.cancel:
            self.cancel.cancel("test")
            for slot, pos, _, _ in rows:
                slot.truncate(pos)
            return 2
        self.calls.append([(slot.seq_id, pos, tok) for slot, pos, tok, _ in rows])
        self.model.choices = []
        for slot, pos, tok, _ in rows:
            held = self.kv.held(slot.seq_id)
            expected = max(held, default=-1) + 1
            assert pos == expected, f"sequence {slot.seq_id}: position {pos}, expected {expected}"
            held[pos] = tok
            slot.record([(pos, tok)])
            self.model.choices.append((self.model.next_token(self.kv.tokens(slot.seq_id)), 5.0))
        return 0

    def fail(self, rc: int, what: str) -> None:
        if rc == 2 or (self.cancel is not None and self.cancel.cancelled):
            raise Cancelled(f"cancelled during {what}")
        raise AssertionError(f"decode failed with {rc}")

    def guided(self, guide: Any, text: str, row: int = -1) -> int:
        """``guide.pick`` between row ``row``'s choice (piece "x") and a runner-up one above it ("y")."""
        best = self.model.choices[row][0]
        return guide.pick(text, [(best, "x", 0.0), (best + 1000, "y", -1.0)])


class RunnerUpGuide:
    """A guide for the fake decoder that takes the runner-up for its first ``n`` picks, then steps
    aside (``released``): its generation shows which tokens it chose."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.picks = 0
        self.released = False
        self.breadth = 2
        self.pieces = None

    def pick(self, text: str, ranked: Sequence[tuple[int, str, float]]) -> int:
        self.picks += 1
        self.released = self.picks > self.n
        return ranked[0][0] if self.released else ranked[1][0]

    def fresh(self) -> RunnerUpGuide:
        return RunnerUpGuide(self.n)


def hold_worker(worker: Any) -> threading.Event:
    """Keep an ``EngineWorker`` in a job until the returned event is set, so jobs queue up behind it."""
    gate, started = threading.Event(), threading.Event()
    worker.submit(lambda e, c: started.set() or gate.wait(30))
    assert started.wait(5)
    return gate
