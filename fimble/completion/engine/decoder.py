"""Filling ``llama_batch``es and choosing tokens: greedy, guided and speculative steps, and aborts.

The decoder owns the context's one ``llama_batch`` and its abort callback. Every row it fills names
the slot (KV sequence) it belongs to, so one call can carry the tokens of one slot (a prompt, a draft)
or of several (``fimble.completion.engine.batch``); each slot's record is updated only after llama.cpp
took the batch, and truncated to what llama.cpp kept when it did not.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.config import TIE_MARGIN, EngineConfig, StopCheck
from fimble.completion.engine.model import Model, aborting
from fimble.completion.engine.slot import Slot
from fimble.completion.engine.speculative import DraftPolicy, DraftStats, PromptLookup
from fimble.errors import Cancelled, EngineError

if TYPE_CHECKING:
    from fimble.completion.engine.guide import Guide

__all__ = ["Decoded", "Decoder", "Row"]

log = logging.getLogger(__name__)

# One batch row: (slot, position, token, logits wanted).
Row = tuple[Slot, int, int, bool]


@dataclass
class Decoded:
    """What a decoding loop produced for one slot."""

    text: str = ""
    tokens: list[int] = field(default_factory=list)
    reason: str = "max_tokens"
    stats: DraftStats = field(default_factory=DraftStats)


class Decoder:
    """Runs ``llama_decode`` on rows of one or several slots; one per context, on the engine's thread."""

    def __init__(self, model: Model, config: EngineConfig) -> None:
        self.model = model
        self.config = config
        self._ll = model.ll
        self.batch = model.ll.llama_batch_init(config.n_batch, 0, 1)
        self.cancel: CancelToken | None = None  # the running request's; the abort callback reads it
        self._abort_armed = False
        self._abort_cb = model.ll.ggml_abort_callback(self._should_abort)
        model.ll.llama_set_abort_callback(model.ctx, self._abort_cb, None)

    def close(self) -> None:
        if self.batch is not None:
            self._ll.llama_batch_free(self.batch)
            self.batch = None

    def _should_abort(self, _data: ctypes.c_void_p) -> bool:
        if self._abort_armed and self.cancel is not None and self.cancel.cancelled:
            aborting.set()  # cleared when the decode returns (``decode_rows``)
            return True
        return False

    # -- one llama_decode -------------------------------------------------------------------------

    def decode_rows(self, rows: Sequence[Row], *, armed: bool = False) -> int:
        """Put ``rows`` (at most ``n_batch``) in the batch and decode them; llama.cpp's return code.

        On success each row's slot records its cell. On failure llama.cpp has removed, for every
        sequence in the batch, the cells from that sequence's first position in it on; the slots are
        truncated to match. ``armed``: the abort callback may stop this call (``self.cancel``)."""
        batch = self.batch
        for i, (slot, pos, tok, logits) in enumerate(rows):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = slot.seq_id
            batch.logits[i] = logits
        batch.n_tokens = len(rows)
        self._abort_armed = armed
        try:
            rc = self._ll.llama_decode(self.model.ctx, batch)
        finally:
            self._abort_armed = False
            aborting.clear()
        firsts: dict[int, tuple[Slot, int]] = {}
        for slot, pos, tok, _ in rows:
            if rc == 0:
                slot.record([(pos, tok)])
            elif slot.seq_id not in firsts:
                firsts[slot.seq_id] = (slot, pos)
        for slot, pos in firsts.values():
            slot.truncate(pos)
        return rc

    def fail(self, rc: int, what: str) -> NoReturn:
        """Raise for llama_decode's ``rc``: Cancelled when it was aborted (or its request cancelled)."""
        if rc == 2 or (self.cancel is not None and self.cancel.cancelled):
            raise Cancelled(f"cancelled during {what}")
        raise EngineError(f"llama_decode failed with code {rc}; see the log (run with -vv)")

    def decode_at(self, slot: Slot, cells: Sequence[tuple[int, int]], logits: bool = True) -> None:
        """Evaluate (position, token) cells of ``slot`` in increasing position order; logits for the
        last only.

        The abort callback is armed only for long evaluations: aborting a few tokens saves little,
        and llama.cpp drops every cell from the aborted batch's first position on, which would lose
        the chunks just moved into place. Background work (a prefetch) is the exception: nobody
        waits for it, so a keystroke should not wait for its few dozen tokens (~10 ms each) either.
        """
        step = self.config.n_batch
        background = self.cancel is not None and self.cancel.background
        arm = background or len(cells) > self.config.abort_min_tokens
        for start in range(0, len(cells), step):
            chunk = cells[start : start + step]
            last = logits and start + len(chunk) == len(cells)
            rows = [(slot, pos, tok, last and i == len(chunk) - 1) for i, (pos, tok) in enumerate(chunk)]
            if (rc := self.decode_rows(rows, armed=arm)) != 0:
                self.fail(rc, "prompt evaluation")

    def decode_all(self, slot: Slot, cells: Sequence[tuple[int, int]]) -> tuple[list[int], list[float]]:
        """Evaluate a few (position, token) cells in one batch, with logits for every one; returns
        the argmax after each (the model's greedy choice of the token that follows it) and its lead
        over the runner-up."""
        rc = self.decode_rows([(slot, pos, tok, True) for pos, tok in cells])
        if rc != 0:
            self.fail(rc, "decoding")
        np = self.model.np
        ptr = self._ll.llama_get_logits(self.model.ctx)
        logits = np.ctypeslib.as_array(ptr, shape=(len(cells), self.model.n_vocab))
        rows = np.arange(len(cells))
        best = logits.argmax(axis=1)
        top = logits[rows, best]
        logits[rows, best] = -np.inf  # llama.cpp's buffer: read once, restored below
        second = logits.max(axis=1)
        logits[rows, best] = top
        return [int(t) for t in best], [float(m) for m in top - second]

    # -- choosing the next token ------------------------------------------------------------------

    def argmax(self) -> int:
        return int(self.model.logits(-1).argmax())

    def guided(self, guide: Guide, text: str, row: int = -1) -> int:
        """The guide's pick among the model's ``guide.breadth`` best next tokens (by logit) at batch
        row ``row`` of the last decode."""
        k = guide.breadth
        np = self.model.np
        logits = self.model.logits(row)
        top = np.argpartition(logits, -k)[-k:]
        top = top[np.argsort(-logits[top], kind="stable")]
        piece = self.model.piece
        if guide.pieces is None:
            tokenize = self.model.tokenize
            guide.pieces = lambda text: [piece(t).decode("utf-8", "replace") for t in tokenize(text)]
        ranked = [(int(t), piece(int(t)).decode("utf-8", "replace"), float(logits[t])) for t in top]
        return guide.pick(text, ranked)

    def lookup(self, prompt: Sequence[int]) -> PromptLookup:
        """The n-gram index drafts come from: the prompt (file, suffix, repository context)."""
        fim = self.model.fim
        control = {fim.prefix, fim.suffix, fim.middle, fim.pad, fim.repo_name, fim.file_sep}
        return PromptLookup(prompt, exclude={t for t in control if t is not None} | fim.stop)

    def step(
        self,
        slot: Slot,
        tok: int,
        lookup: PromptLookup | None,
        budget: int,
        stats: DraftStats,
        pick: Callable[[], int],
        policy: DraftPolicy,
    ) -> list[int]:
        """Decode ``tok`` (with a draft after it when one is worth it); returns the model's next
        tokens: the accepted draft tokens, then the first token of its own choosing (``pick``: the
        argmax, or a guide's choice).

        ``budget`` caps the draft at the tokens the request may still generate, so a fully accepted
        draft never computes more than plain decoding would. Rejected tokens leave the cache at once.

        A batch is computed with other kernels than a single token, so its logits differ by rounding
        (measured on Qwen2.5-Coder-1.5B: the gap between the two best tokens moves by up to ~0.4).
        A choice closer than ``TIE_MARGIN`` could come out otherwise in plain decoding, so it is
        not taken from the batch: the cell it came from is decoded again alone, as plain decoding
        would, and its choice is used instead.
        """
        pos = len(slot.cells)
        draft: list[int] = []
        match_len = 0
        if lookup is not None:
            match_len, draft = lookup.draft(min(budget, self.model.n_ctx - pos - 2, self.config.n_batch - 1))
            draft = draft[: policy.length(match_len, len(draft))]
        if not draft:
            self.decode_at(slot, [(pos, tok)])
            return [pick()]
        cells = [(pos, tok)] + [(pos + 1 + i, t) for i, t in enumerate(draft)]
        picks, margins = self.decode_all(slot, cells)
        accepted = 0
        while (
            accepted < len(draft) and picks[accepted] == draft[accepted] and margins[accepted] >= TIE_MARGIN
        ):
            accepted += 1
        stats.drafts += 1
        stats.drafted += len(draft)
        stats.accepted += accepted
        policy.update(match_len, len(draft), accepted)
        if margins[accepted] >= TIE_MARGIN:
            if accepted < len(draft):
                slot.truncate(pos + 1 + accepted)
            return picks[: accepted + 1]
        # A near-tie: the token after the accepted ones is chosen by a single-token decode.
        slot.truncate(pos + accepted)
        self.decode_at(slot, [cells[accepted]])
        return [*picks[:accepted], pick()]

    # -- one slot's generation --------------------------------------------------------------------

    def run(
        self,
        slot: Slot,
        prompt: Sequence[int],
        *,
        max_tokens: int,
        stop: StopCheck | None,
        cancel: CancelToken | None,
        on_text: Callable[[str], None] | None,
        speculative: bool,
        guide: Guide | None,
        policy: DraftPolicy,
    ) -> Decoded:
        """Decode after ``prompt`` (already in ``slot``, its logits the last computed) until a stop.

        Tokens come out one at a time and go through the same checks in the same order whether or
        not drafts are checked (see ``Engine.generate``); the cells of accepted draft tokens a plain
        decode would not have computed yet are dropped on leaving, so the cache is plain decoding's.
        """
        model = self.model
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        out = Decoded(stats=DraftStats())
        # A guide chooses among the model's best tokens, which a draft checked by argmax would not:
        # drafts wait until it has stepped aside (a cursor line's indentation, written first).
        lookup = self.lookup(prompt) if speculative else None

        def pick() -> int:  # the model's next token, or the guide's choice for the text so far
            return self.argmax() if guide is None else self.guided(guide, out.text)

        # Next tokens the model has already chosen; all but the last have their KV cells computed
        # (accepted draft tokens), which a plain decode would compute only when it got to them.
        chosen: deque[int] = deque([pick()])
        ahead = 0  # such cells at the end of the cache, dropped on leaving the loop
        self.cancel = cancel
        try:
            while len(out.tokens) < max_tokens:
                ahead = len(chosen) - 1
                if cancel is not None and cancel.cancelled:
                    out.reason = "cancelled"
                    break
                tok = chosen.popleft()
                ahead = len(chosen)
                if model.ends(tok):
                    out.reason = "eog"
                    break
                out.tokens.append(tok)
                out.text += decoder.decode(model.piece(tok))
                if stop is not None and (hit := stop(out.text)) is not None:
                    out.reason, keep = hit
                    out.text = out.text[:keep]
                    break
                if on_text is not None:
                    on_text(out.text)
                if len(slot.cells) - ahead + 1 >= model.n_ctx:
                    out.reason = "context_full"
                    break
                if lookup is not None:
                    lookup.append(tok)
                if chosen:  # an accepted draft token: its KV is already there
                    continue
                try:
                    drafting = lookup if guide is None or guide.released else None
                    chosen.extend(
                        self.step(slot, tok, drafting, max_tokens - len(out.tokens), out.stats, pick, policy)
                    )
                except Cancelled:
                    out.reason = "cancelled"
                    ahead = 0
                    break
            else:
                ahead = len(chosen) - 1
        finally:
            self.cancel = None
            if ahead > 0:
                slot.truncate(len(slot.cells) - ahead)
        out.text += decoder.decode(b"", final=True) if out.reason in ("max_tokens", "eog") else ""
        return out
