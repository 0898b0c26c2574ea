"""Several prompts decoded together, one KV sequence (batch slot) each, as llama.cpp's server does.

Every running sequence advances one token per ``llama_decode`` call, one batch row each: the weights
are read once per call for all rows, which is what makes several sequences cheaper than the same
prompts one after another on a CPU. Two things keep the rows full and the prompts cheap:

- **Continuous batching**: when a sequence stops, the next waiting prompt takes its slot between two
  decode steps (its prompt evaluated alone, ``_admit`` says why) and joins the rows at the next step,
  instead of the slot idling until the slowest sequence of a wave ends.
- **Late arrivals**: a ``feed`` gives prompts that came after the call started (independent HTTP
  clients, ``fimble.completion.side_by_side``); they wait for a slot like the others.
- **Shared heads**: prompts are taken in token order (``heads.admission_order``), so prompts that
  begin alike (lines of one file) run side by side. A prompt whose first tokens some batch sequence
  already holds (at least ``MIN_HEAD`` of them) gets those KV cells copied (``KVMemory.cp``: the
  same cells, tagged with one more sequence) and only its own tail is evaluated. A finished
  sequence's cells are kept for a moment when a waiting prompt can start from them.

Cell budget: the KV buffer is unified, so the batch slots use the same n_ctx cells as the interactive
slot (sequence 0). A prompt is admitted when the cells held (a shared cell counted once, ``CellCount``)
plus what every running sequence may still generate plus its own tail and ``max_tokens`` fit. When
the cells the interactive slot holds are what stands in the way, it is cleared (its record says so:
the next keystroke evaluates its prompt again) rather than narrowing the batch, unless the batch is a
server's (``keep_interactive``): then the batch runs narrower and the cells go only for a prompt that
fits no other way. A prompt that fits only alone runs alone and may stop at a full context. Batch
slots are emptied on return, whatever the outcome.

Greedy, no drafts: a choice whose lead over the runner-up is under ``TIE_MARGIN`` is counted in
``BatchGeneration.near_ties`` (and logged at debug), because there the rounding of another batch shape
(the same prompt decoded alone) could have chosen the other token. A prompt with a guide (an import
line, ``fimble.completion.engine.guide``) takes its guide's pick among its row's best tokens instead of
the argmax, as ``Decoder.run`` does alone; its near-ties are the model's (the two best tokens close),
since that is where another shape could rank them otherwise and the guide pick otherwise too.
"""

from __future__ import annotations

import codecs
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.config import TIE_MARGIN, BatchGeneration, StopCheck
from fimble.completion.engine.decoder import Decoder, Row
from fimble.completion.engine.heads import MIN_HEAD, CellCount, admission_order, shared_head
from fimble.completion.engine.slot import Slot
from fimble.errors import Cancelled, EngineError

if TYPE_CHECKING:
    from fimble.completion.engine.guide import Guide

__all__ = ["MIN_HEAD", "Arrival", "Feed", "OnDone", "check_fits", "decode_batch"]

log = logging.getLogger(__name__)

# Called with a prompt's index and its generation as soon as it stops (the others may still run).
OnDone = Callable[[int, BatchGeneration], None]


@dataclass(frozen=True)
class Arrival:
    """A prompt given to a running ``decode_batch`` by its ``feed``: its stop rules, its length,
    its own cancel token (its client may go while the others run on) and its guide, if any."""

    prompt: Sequence[int]
    max_tokens: int
    stop: StopCheck | None = None
    cancel: CancelToken | None = None
    guide: Guide | None = None


# Called between decode steps with ``last`` False, and with ``last`` True when nothing is left to
# decode: the prompts that arrived since (numbered on from the call's own, in order). Given ``last``,
# an empty answer ends the call, so the feed must stop taking prompts in the same breath.
Feed = Callable[[bool], Sequence[Arrival]]


def check_fits(prompts: Sequence[Sequence[int]], n_ctx: int) -> None:
    """A prompt that cannot fit the context even alone is a caller's error, as for ``prepare``."""
    for p in prompts:
        if not p:
            raise EngineError("an empty prompt has nothing to continue")
        if len(p) >= n_ctx:
            raise EngineError(f"prompt of {len(p)} tokens does not fit the context of {n_ctx}")


@dataclass
class _Seq:
    """One prompt's progress through the batch."""

    index: int  # in the caller's list
    prompt: Sequence[int]
    max_tokens: int
    stop: StopCheck | None = None  # its own stop rules (``decode_batch``'s ``stops``)
    gone: CancelToken | None = None  # its own cancel (its client went), beside the call's
    guide: Guide | None = None  # picks its tokens among the model's best (an import line)
    slot: Slot | None = None  # while it runs
    utf8: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    reason: str = ""  # empty while it waits or runs
    near_ties: list[int] = field(default_factory=list)
    choice: int = -1  # the model's next token, from the last decode's logits
    margin: float = 0.0  # its lead over the runner-up
    ready: bool = False  # ``choice`` is new: not taken yet
    head: int = 0  # prompt tokens copied from another sequence instead of evaluated
    evaluated: bool = False  # its prompt is in its slot (not cancelled during prompt evaluation)
    started: float = 0.0  # perf_counter when its prompt evaluation began
    admitted: float = 0.0  # ... and ended
    ended: float = 0.0  # perf_counter when it stopped
    result: BatchGeneration | None = None  # once it stopped

    def choose(self, decoder: Decoder, row: int) -> None:
        """Its next token from batch row ``row`` of the last decode: the argmax, or its guide's pick
        (the margin stays the model's own lead, see the module)."""
        self.choice, self.margin = decoder.model.top2(row)
        if self.guide is not None:
            self.choice = decoder.guided(self.guide, self.text, row)
        self.ready = True


class _Batch:
    """The state of one ``decode_batch`` call: waiting, running and finished prompts, and the slots."""

    def __init__(
        self,
        decoder: Decoder,
        slots: Sequence[Slot],
        seqs: list[_Seq],
        *,
        cancel: CancelToken | None,
        interactive: Slot | None,
        min_head: int,
        on_done: OnDone | None,
        keep_interactive: bool = False,
        feed: Feed | None = None,
    ) -> None:
        self.decoder = decoder
        self.model = decoder.model
        self.n_ctx: int = decoder.model.n_ctx
        self.waiting = deque(seqs[i] for i in admission_order([s.prompt for s in seqs]))
        self.free: list[Slot] = list(slots)  # slots no running prompt holds (maybe keeping a head)
        self.live: list[_Seq] = []
        self.cells = CellCount()
        self.cancel = cancel
        self.interactive = interactive
        self.min_head = min_head
        self.on_done = on_done
        self.keep_interactive = keep_interactive
        self.feed = feed
        self.seqs = seqs

    # -- cells ----------------------------------------------------------------------------------

    @property
    def reserved(self) -> int:
        """Cells other sequences (the interactive slot) hold."""
        return len(self.interactive.cells) if self.interactive is not None else 0

    def committed(self) -> int:
        """Cells held now plus what the running sequences may still add."""
        growth = sum(max(0, s.max_tokens - len(s.tokens)) for s in self.live)
        return self.cells.used + growth

    def sync(self, slot: Slot) -> None:
        self.cells.sync(slot.seq_id, len(slot.cells))

    def drop(self, slot: Slot, keep: int = 0) -> None:
        if keep:
            slot.truncate(keep)
        else:
            slot.clear()
        self.sync(slot)

    def useful(self, slot: Slot) -> bool:
        """A free slot's cells are worth keeping: one of the next waiting prompts starts with them."""
        soon = islice(self.waiting, len(self.free) + 1)
        return any(shared_head(slot.cells, w.prompt) >= self.min_head for w in soon)

    def tidy(self) -> None:
        """Free the cells of free slots no waiting prompt can start from."""
        for slot in self.free:
            if slot.cells and not self.useful(slot):
                self.drop(slot)

    # -- finishing ------------------------------------------------------------------------------

    def finish(self, s: _Seq, reason: str = "") -> None:
        """``s`` stopped: its slot is free (its cells kept while a waiting prompt may use them)."""
        if reason:
            s.reason = reason
        s.ended = time.perf_counter()
        if s in self.live:
            self.live.remove(s)
        if s.slot is not None:
            self.free.append(s.slot)
            if not self.useful(s.slot):
                self.drop(s.slot)
            s.slot = None
        self.report(s)

    def report(self, s: _Seq) -> None:
        if s.result is None:
            s.result = _generation(s)
            if self.on_done is not None:
                self.on_done(s.index, s.result)

    def cancel_all(self) -> None:
        for s in [*self.live, *self.waiting]:
            self.finish(s, "cancelled")
        self.waiting.clear()

    # -- admitting a waiting prompt -------------------------------------------------------------

    def source(self, prompt: Sequence[int]) -> tuple[Slot | None, int]:
        """The slot (running or free) holding the longest head of ``prompt``, and its length."""
        best: tuple[Slot | None, int] = (None, 0)
        for slot in [*self.free, *(s.slot for s in self.live if s.slot is not None)]:
            if (n := shared_head(slot.cells, prompt)) > best[1]:
                best = (slot, n)
        return best if best[1] >= self.min_head else (None, 0)

    def admit(self) -> None:
        """Start waiting prompts in free slots while their cells fit (at least one when none runs)."""
        while self.waiting and self.free:
            if self.cancel is not None and self.cancel.cancelled:
                self.cancel_all()
                return
            s = self.waiting[0]
            if s.gone is not None and s.gone.cancelled:
                self.waiting.popleft()
                self.finish(s, "cancelled")
                continue
            src, head = self.source(s.prompt)
            if src is not None and src in self.free:
                target = src
                self.drop(target, keep=head)
            else:
                target = next((f for f in self.free if not f.cells), self.free[0])
                self.drop(target)
            need = len(s.prompt) - head + s.max_tokens
            if not self.fits(need, target):
                return
            self.waiting.popleft()
            self.free.remove(target)
            if src is not None and src is not target:
                target.kv.cp(src.seq_id, target.seq_id, 0, head)
                target.cells = list(s.prompt[:head])
                self.cells.copy(src.seq_id, target.seq_id, head)
            s.slot, s.head = target, head
            self.live.append(s)
            try:
                self.evaluate(s)
            except Cancelled:
                self.finish(s, "cancelled")
                self.cancel_all()
                return
        self.tidy()

    def fits(self, need: int, target: Slot) -> bool:
        """Room for ``need`` more cells, making it by dropping kept heads and the interactive slot's
        cells when that is enough; always room for one prompt when nothing runs."""
        if self.committed() + need <= self.n_ctx - self.reserved:
            return True
        for slot in self.free:
            if slot.cells and slot is not target:
                self.drop(slot)
        if self.committed() + need <= self.n_ctx - self.reserved:
            return True
        narrower = self.keep_interactive and self.live  # wait for a running prompt to end instead
        if self.reserved and not narrower and (not self.live or self.committed() + need <= self.n_ctx):
            assert self.interactive is not None
            log.debug(
                "a batch prompt needs %d KV cells: the interactive slot's %d are dropped", need, self.reserved
            )
            self.interactive.clear()
        return not self.live or self.committed() + need <= self.n_ctx - self.reserved

    def evaluate(self, s: _Seq) -> None:
        """Evaluate ``s``'s prompt after its copied head, ``n_batch`` rows per call, reading its first
        choice from the call that held its last token (logits live only until the next call).

        One prompt per call, between decode steps: prompt evaluation is bound by compute, not by
        reading the weights, so several prompts in one call were no faster (0.5B, 3 prompts: 2.0 s
        together, 1.9 s apart), and a prompt alone in its calls is computed in the same shapes as
        when it is decoded alone, so its first token is the same even at a near-tie. Mixed, the 1.5B
        model's first token differed at near-ties (an end of generation instead of ``_init__``), and
        a first token that differs changes the whole answer."""
        assert s.slot is not None
        slot, prompt, step = s.slot, s.prompt, self.decoder.config.n_batch
        s.started = time.perf_counter()
        last = len(prompt) - 1
        rows: list[Row] = [(slot, pos, prompt[pos], pos == last) for pos in range(s.head, len(prompt))]
        try:
            for start in range(0, len(rows), step):
                chunk = rows[start : start + step]
                rc = self.decoder.decode_rows(chunk, armed=True)
                if rc != 0:
                    self.decoder.fail(rc, "batch prompt evaluation")
                if chunk[-1][3]:
                    s.choose(self.decoder, len(chunk) - 1)
        finally:
            self.sync(slot)
        s.evaluated = True
        s.admitted = time.perf_counter()

    # -- one decode step ------------------------------------------------------------------------

    def take_all(self) -> bool:
        """Every running sequence takes the token it was given; True when one of them stopped."""
        stopped = False
        for s in list(self.live):
            if s.ready:
                s.ready = False
                _take(s, self.model, s.max_tokens, s.stop, self.cancel)
                if s.reason:
                    self.finish(s)
                    stopped = True
        return stopped

    def step(self) -> bool:
        """Decode one token of every running sequence; False when nothing is left to decode."""
        rows: list[Row] = []
        used = self.cells.used + self.reserved
        for s in list(self.live):
            assert s.slot is not None
            if used + len(rows) + 1 > self.n_ctx:
                self.finish(s, "context_full")
            else:
                rows.append((s.slot, len(s.slot.cells), s.tokens[-1], True))
        if not rows:
            return False
        running = list(self.live)
        rc = self.decoder.decode_rows(rows, armed=True)
        for s in running:
            assert s.slot is not None
            self.sync(s.slot)
        if rc != 0:
            try:
                self.decoder.fail(rc, "batch decoding")
            except Cancelled:
                self.cancel_all()
                return False
        for i, s in enumerate(running):
            s.choose(self.decoder, i)
        return True

    def arrive(self, last: bool) -> bool:
        """Queue the prompts the feed gives; whether it gave any."""
        if self.feed is None:
            return False
        came = self.feed(last)
        for a in came:
            s = _Seq(len(self.seqs), a.prompt, a.max_tokens, a.stop, gone=a.cancel, guide=a.guide)
            self.seqs.append(s)
            self.waiting.append(s)
        return bool(came)

    def run(self) -> None:
        while True:
            self.arrive(last=False)
            self.admit()
            if self.take_all() and self.waiting and self.free:
                continue  # a slot came free: refill it before the next step
            if not self.step() and not self.waiting and not self.arrive(last=True):
                break


def decode_batch(
    decoder: Decoder,
    slots: Sequence[Slot],
    prompts: Sequence[Sequence[int]],
    *,
    max_tokens: int,
    stop: StopCheck | None = None,
    cancel: CancelToken | None = None,
    stops: Sequence[StopCheck | None] | None = None,
    interactive: Slot | None = None,
    min_head: int = MIN_HEAD,
    on_done: OnDone | None = None,
    limits: Sequence[int] | None = None,
    keep_interactive: bool = False,
    feed: Feed | None = None,
    guides: Sequence[Guide | None] | None = None,
) -> list[BatchGeneration]:
    """Greedy completions of ``prompts`` (any number; at most one per slot at a time, all slots
    empty), decoded together, one ``BatchGeneration`` per prompt in order.

    Stops each at an end-of-generation or FIM stop token, ``stop`` on its text, ``max_tokens``, a full
    context, or ``cancel`` (checked between steps; the abort callback may also stop a step, since
    nobody waits for batch work). ``stops``: one stop check per prompt instead of ``stop`` for all
    (each request its own rules, so none decodes past its end while the others go on); ``limits``:
    one ``max_tokens`` per prompt (at most ``max_tokens``), which is also what its cells are budgeted by;
    ``guides``: one guide (or None) per prompt, each used by one generation only (guides keep state).
    ``interactive``: the slot whose cells the batch may take when it needs them (see the module);
    with ``keep_interactive`` only for a prompt that cannot run otherwise (nothing else running).
    ``on_done(index, generation)`` hears of each prompt as soon as it stops. ``feed``: prompts that
    arrive while it runs (``Feed``), reported through ``on_done`` with indices after ``prompts``';
    the call returns only ``prompts``' generations. The slots are empty again on return."""
    checks = list(stops) if stops is not None else [stop] * len(prompts)
    caps = [min(max_tokens, n) for n in limits] if limits is not None else [max_tokens] * len(prompts)
    led = list(guides) if guides is not None else [None] * len(prompts)
    rules = zip(prompts, caps, checks, led, strict=True)
    seqs = [_Seq(i, p, n, c, guide=g) for i, (p, n, c, g) in enumerate(rules)]
    batch = _Batch(
        decoder,
        slots,
        seqs,
        cancel=cancel,
        interactive=interactive,
        min_head=min_head,
        on_done=on_done,
        keep_interactive=keep_interactive,
        feed=feed,
    )
    decoder.cancel = cancel
    try:
        batch.run()
    finally:
        decoder.cancel = None
        for slot in slots:
            slot.clear()
    for s in batch.seqs:
        if s.result is None:  # never ran: cancelled before its turn
            batch.finish(s, s.reason or "cancelled")
    return [s.result or _generation(s) for s in batch.seqs[: len(prompts)]]


def _take(s: _Seq, model: Any, max_tokens: int, stop: StopCheck | None, cancel: CancelToken | None) -> None:
    """Take ``s``'s next token through the checks ``Decoder.run`` makes, in its order."""
    if len(s.tokens) >= max_tokens:
        s.reason = "max_tokens"
        return
    if (cancel is not None and cancel.cancelled) or (s.gone is not None and s.gone.cancelled):
        s.reason = "cancelled"
        return
    tok = s.choice
    if s.margin < TIE_MARGIN:
        s.near_ties.append(len(s.tokens))
        seq = s.slot.seq_id if s.slot is not None else -1
        log.debug("seq %d: token %d chosen by a near-tie (lead %.2f)", seq, len(s.tokens), s.margin)
    if model.ends(tok):
        s.reason = "eog"
        return
    s.tokens.append(tok)
    s.text += s.utf8.decode(model.piece(tok))
    if stop is not None and (hit := stop(s.text)) is not None:
        s.reason, keep = hit
        s.text = s.text[:keep]


def _generation(s: _Seq) -> BatchGeneration:
    text = s.text + (s.utf8.decode(b"", final=True) if s.reason in ("max_tokens", "eog") else "")
    started = s.started or s.ended
    admitted = s.admitted or s.ended
    return BatchGeneration(
        text=text,
        tokens=tuple(s.tokens),
        stop_reason=s.reason or "cancelled",
        prompt_tokens=len(s.prompt),
        tokens_evaluated=len(s.prompt) - s.head if s.evaluated else 0,
        tokens_reused=s.head if s.evaluated else 0,
        prompt_ms=max(0.0, (admitted - started) * 1000),
        generation_ms=max(0.0, (s.ended - admitted) * 1000),
        near_ties=tuple(s.near_ties),
        guide="" if s.guide is None else ("released" if s.guide.released else "kept"),
    )
