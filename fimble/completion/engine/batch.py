"""Several prompts decoded together, one KV sequence (batch slot) each, as llama.cpp's server does.

Each prompt is evaluated into its own slot (``_evaluate_prompts`` says why one prompt per call);
then every unfinished sequence advances one token per ``llama_decode`` call, one batch row each.
The weights are read once per call for all rows, which is what makes several sequences cheaper than
the same prompts one after another on a CPU.

Cell budget: the KV buffer is unified, so the batch slots use the same n_ctx cells as the interactive
slot (sequence 0). A wave of prompts needs its prompts' lengths plus ``max_tokens`` per prompt; when the
cells the interactive slot holds leave less than that free, the interactive slot is cleared first (its
record says so: the next keystroke evaluates its prompt again) rather than failing the batch. Batch
slots are emptied when the wave ends, whatever the outcome.

Greedy only, no drafts and no guide: a choice whose lead over the runner-up is under ``TIE_MARGIN`` is
counted in ``BatchGeneration.near_ties`` (and logged at debug), because there the rounding of another batch
shape (the same prompt decoded alone) could have chosen the other token.
"""

from __future__ import annotations

import codecs
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.config import TIE_MARGIN, BatchGeneration, StopCheck
from fimble.completion.engine.decoder import Decoder, Row
from fimble.completion.engine.slot import Slot
from fimble.errors import Cancelled, EngineError

__all__ = ["cells_needed", "check_fits", "decode_wave"]

log = logging.getLogger(__name__)


def cells_needed(prompts: Sequence[Sequence[int]], max_tokens: int) -> int:
    """KV cells a wave of ``prompts`` may occupy at its end: every prompt and its generated tokens."""
    return sum(len(p) + max_tokens for p in prompts)


def check_fits(prompts: Sequence[Sequence[int]], n_ctx: int) -> None:
    """A prompt that cannot fit the context even alone is a caller's error, as for ``prepare``."""
    for p in prompts:
        if not p:
            raise EngineError("an empty prompt has nothing to continue")
        if len(p) >= n_ctx:
            raise EngineError(f"prompt of {len(p)} tokens does not fit the context of {n_ctx}")


@dataclass
class _Seq:
    """One prompt's progress through the wave."""

    slot: Slot
    prompt: Sequence[int]
    stop: StopCheck | None = None  # its own stop rules (``decode_wave``'s ``stops``)
    utf8: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    reason: str = ""  # empty while it runs
    near_ties: list[int] = field(default_factory=list)
    choice: int = -1  # the model's next token, from the last decode's logits
    margin: float = 0.0  # its lead over the runner-up
    ended: float = 0.0  # perf_counter when it stopped
    evaluated: bool = False  # its prompt is in its slot (not cancelled during prompt evaluation)

    def choose(self, choice: tuple[int, float]) -> None:
        self.choice, self.margin = choice


def decode_wave(
    decoder: Decoder,
    slots: Sequence[Slot],
    prompts: Sequence[Sequence[int]],
    *,
    max_tokens: int,
    stop: StopCheck | None = None,
    cancel: CancelToken | None = None,
    reserved: int = 0,
    stops: Sequence[StopCheck | None] | None = None,
) -> list[BatchGeneration]:
    """Greedy completions of ``prompts`` (at most one per slot, all slots empty), decoded together.

    Stops each at an end-of-generation or FIM stop token, ``stop`` on its text, ``max_tokens``, a full
    context (``reserved``: cells other sequences hold), or ``cancel`` (checked between steps; the abort
    callback may also stop a step, since nobody waits for batch work). The slots are empty again on
    return. ``stops``: one stop check per prompt instead of ``stop`` for all (each request its own
    rules, so none decodes past its end while the others go on)."""
    model = decoder.model
    checks = list(stops) if stops is not None else [stop] * len(prompts)
    seqs = [_Seq(slot, prompt, check) for slot, prompt, check in zip(slots, prompts, checks, strict=False)]
    t0 = time.perf_counter()
    decoder.cancel = cancel
    try:
        try:
            _evaluate_prompts(decoder, seqs)
        except Cancelled:
            for s in seqs:
                s.reason = "cancelled"
        t1 = time.perf_counter()
        running = [s for s in seqs if not s.reason]
        while running:
            rows: list[Row] = []
            used = sum(len(s.slot.cells) for s in seqs) + reserved
            for s in running:
                _take(s, model, max_tokens, s.stop, cancel)
                if not s.reason and used + len(rows) + 1 > model.n_ctx:
                    s.reason = "context_full"
                if s.reason:
                    s.ended = time.perf_counter()
                else:
                    rows.append((s.slot, len(s.slot.cells), s.tokens[-1], True))
            running = [s for s in running if not s.reason]
            if not rows:
                break
            rc = decoder.decode_rows(rows, armed=True)
            if rc != 0:
                try:
                    decoder.fail(rc, "batch decoding")
                except Cancelled:
                    for s in running:
                        s.reason, s.ended = "cancelled", time.perf_counter()
                    break
            for i, s in enumerate(running):
                s.choose(model.top2(i))
    finally:
        decoder.cancel = None
        for s in seqs:
            s.slot.clear()
    return [_generation(s, t0, t1) for s in seqs]


def _evaluate_prompts(decoder: Decoder, seqs: list[_Seq]) -> None:
    """Evaluate every prompt into its slot, ``n_batch`` rows per call, reading each prompt's first
    choice from the call that held its last token (logits live only until the next call).

    One prompt per call: prompt evaluation is bound by compute, not by reading the weights, so
    several prompts in one call were no faster (0.5B, 3 prompts: 2.0 s together, 1.9 s apart), and
    a prompt alone in its calls is computed in the same shapes as when it is decoded alone, so its
    first token is the same even at a near-tie. Mixed, the 1.5B model's first token differed at
    near-ties (an end of generation instead of ``_init__``), and a first token that differs changes
    the whole answer."""
    step = decoder.config.n_batch
    for s in seqs:
        rows: list[Row] = [(s.slot, pos, tok, pos == len(s.prompt) - 1) for pos, tok in enumerate(s.prompt)]
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            rc = decoder.decode_rows(chunk, armed=True)
            if rc != 0:
                decoder.fail(rc, "batch prompt evaluation")
            if chunk[-1][3]:
                s.choose(decoder.model.top2(len(chunk) - 1))
        s.evaluated = True


def _take(s: _Seq, model: Any, max_tokens: int, stop: StopCheck | None, cancel: CancelToken | None) -> None:
    """Take ``s``'s next token through the checks ``Decoder.run`` makes, in its order."""
    if len(s.tokens) >= max_tokens:
        s.reason = "max_tokens"
        return
    if cancel is not None and cancel.cancelled:
        s.reason = "cancelled"
        return
    tok = s.choice
    if s.margin < TIE_MARGIN:
        s.near_ties.append(len(s.tokens))
        log.debug("seq %d: token %d chosen by a near-tie (lead %.2f)", s.slot.seq_id, len(s.tokens), s.margin)
    if model.ends(tok):
        s.reason = "eog"
        return
    s.tokens.append(tok)
    s.text += s.utf8.decode(model.piece(tok))
    if stop is not None and (hit := stop(s.text)) is not None:
        s.reason, keep = hit
        s.text = s.text[:keep]


def _generation(s: _Seq, t0: float, t1: float) -> BatchGeneration:
    text = s.text + (s.utf8.decode(b"", final=True) if s.reason in ("max_tokens", "eog") else "")
    return BatchGeneration(
        text=text,
        tokens=tuple(s.tokens),
        stop_reason=s.reason or "cancelled",
        prompt_tokens=len(s.prompt),
        tokens_evaluated=len(s.prompt) if s.evaluated else 0,
        tokens_reused=0,
        prompt_ms=(t1 - t0) * 1000,
        generation_ms=max(0.0, ((s.ended or t1) - t1) * 1000),
        near_ties=tuple(s.near_ties),
    )
