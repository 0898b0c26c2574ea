"""Decode a batch's pending items on one engine, a group at a time, journaling each finished group.

Every item is planned exactly as the HTTP server plans a client's prompt (``plan_request``: fimble's
FIM layout, stop rules and clean-up), so an item's answer is what ``/v1/completions`` would return
for the same text. Records are journaled ``width`` at a time as they finish, so a SIGKILL loses at
most the work under way (never a record already written). With ``width`` 1 every item is decoded
alone; wider runs use the engine's multi-sequence decoding when it has one (several KV sequences
advanced per pass over the weights, ``WINDOW`` groups handed over at once so that freed slots are
refilled, items of one file side by side so that their shared head is evaluated once), and are
decoded one by one otherwise, with the same outputs either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fimble.batch.items import BatchItem, ItemError
from fimble.batch.journal import Journal
from fimble.completion.engine import Engine, Generation, StopCheck
from fimble.completion.prompt.fim import FimPrompt
from fimble.completion.raw_requests import RawPlan, plan_request
from fimble.errors import FimbleError

__all__ = ["WINDOW", "BatchSummary", "run_batch"]

log = logging.getLogger(__name__)

# Items handed to the engine at once, in groups of ``width``: more than its slots, so that a slot whose
# request stopped is refilled at once (continuous batching) and lines of one file share their head.
# Records are still journaled ``width`` at a time, as they finish.
WINDOW = 8


@dataclass
class BatchSummary:
    """What a run did; ``skipped`` were finished by an earlier run of the same output."""

    total: int = 0
    done: int = 0
    errors: int = 0
    skipped: int = 0
    width: int = 1
    tokens_generated: int = 0
    prompt_tokens: int = 0
    seconds: float = 0.0
    repaired_lines: int = 0
    tokens_evaluated: int = 0  # prompt tokens computed; the rest were reused (a cache, a shared head)
    tokens_reused: int = 0
    near_ties: int = 0  # batched choices whose lead was under the tie margin (may differ from alone)
    stop_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def items_per_s(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_generated / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["items_per_s"] = round(self.items_per_s, 3)
        out["tokens_per_s"] = round(self.tokens_per_s, 2)
        out["seconds"] = round(self.seconds, 3)
        return out


def _error_record(item_id: str, line_no: int, error: str) -> dict[str, Any]:
    return {"id": item_id, "line": line_no, "error": error}


def _record(item: BatchItem, text: str, gen: Generation) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": item.id,
        "text": text,
        "tokens": len(gen.tokens),
        "stop_reason": gen.stop_reason,
        "prompt_tokens": gen.prompt_tokens,
        "timings": {
            "prompt_ms": round(gen.prompt_ms, 1),
            "generation_ms": round(gen.generation_ms, 1),
            "tokens_evaluated": gen.tokens_evaluated,
            "tokens_reused": gen.tokens_reused,
        },
    }
    # Decoded beside others: where a choice's lead was this small, decoding alone may have differed.
    # (A tie at index len(tokens) chose the end-of-generation token that ended it.)
    if ties := [t for t in getattr(gen, "near_ties", ()) if t <= len(gen.tokens)]:
        record["near_ties"] = len(ties)
    return record


def _tokens(prompt: FimPrompt | list[int]) -> list[int]:
    return list(prompt.tokens) if isinstance(prompt, FimPrompt) else prompt


def _decode_one(engine: Engine, plan: RawPlan, prompt: FimPrompt | list[int]) -> Generation:
    return engine.generate(
        _tokens(prompt),
        max_tokens=plan.max_tokens,
        stop=plan.stop,
        reuse_limit=prompt.stable_len if isinstance(prompt, FimPrompt) else 0,
        guide=plan.guide,
    )


def _stop_within(plan: RawPlan) -> StopCheck:
    """``plan``'s stop rules, and its own ``max_tokens`` when the group decodes to a larger one: the
    check runs once per generated token, after it, as ``Engine.generate`` runs it."""
    taken = 0

    def check(text: str) -> tuple[str, int] | None:
        nonlocal taken
        taken += 1
        if (hit := plan.stop(text)) is not None:
            return hit
        return ("max_tokens", len(text)) if taken >= plan.max_tokens else None

    return check


def _decode_group(
    engine: Engine,
    plans: Sequence[RawPlan],
    prompts: Sequence[FimPrompt | list[int]],
    on_done: Callable[[int, Generation], None],
) -> None:
    """``on_done(index, generation)`` for every plan, as each is done: greedy, as if decoded alone.

    Where the engine has batch slots, the plans are decoded together in one ``generate_batch``, each
    with its own stop rules, ``max_tokens`` and import guide: equal to decoding alone except after a
    near-tie (``BatchGeneration.near_ties``). The engine keeps its slots busy (a waiting plan takes
    the slot of one that stopped) and evaluates a head that plans share (lines of one file) once."""
    if len(plans) < 2 or not getattr(engine, "batch_slots", None):
        for i, plan in enumerate(plans):
            on_done(i, _decode_one(engine, plan, prompts[i]))
        return
    engine.generate_batch(
        [_tokens(p) for p in prompts],
        max_tokens=max(plan.max_tokens for plan in plans),
        stops=[_stop_within(plan) for plan in plans],
        limits=[plan.max_tokens for plan in plans],
        on_done=on_done,
        guides=[plan.guide for plan in plans],
    )


def _same_files_together(items: Sequence[BatchItem]) -> list[BatchItem]:
    """``items`` with those of one file moved up to its first one, and a file's items in the order
    of their text before the cursor: the engine evaluates a head that prompts of one file share
    once when they are decoded together, and decoded one after another the cache still holds it
    (sorted, each prompt shares with the one before it the most it shares with any)."""
    first: dict[str, int] = {}
    keyed = [
        (first.setdefault(item.raw.path, n), item.raw.prefix, n, item)
        if item.raw.path is not None
        else (n, "", n, item)
        for n, item in enumerate(items)
    ]
    return [item for *_, item in sorted(keyed, key=lambda k: k[:3])]


def _run_window(
    engine: Engine,
    items: Sequence[BatchItem],
    width: int,
    summary: BatchSummary,
    commit: Callable[[list[dict[str, Any]]], None],
) -> None:
    """Plan and decode ``items``, committing their records ``width`` at a time as they finish."""
    records: list[dict[str, Any]] = []
    runnable: list[tuple[BatchItem, RawPlan, FimPrompt | list[int]]] = []
    for item in items:
        try:
            plan = plan_request(item.raw, item.options)
            runnable.append((item, plan, plan.build(engine)))
        except FimbleError as err:
            records.append(_error_record(item.id, item.line_no, str(err)))

    def finished(i: int, gen: Generation) -> None:
        item, plan, _ = runnable[i]
        records.append(_record(item, plan.final(gen.text), gen))
        summary.done += 1
        summary.tokens_generated += len(gen.tokens)
        summary.near_ties += records[-1].get("near_ties", 0)
        summary.prompt_tokens += gen.prompt_tokens
        summary.tokens_evaluated += gen.tokens_evaluated
        summary.tokens_reused += gen.tokens_reused
        summary.stop_reasons[gen.stop_reason] = summary.stop_reasons.get(gen.stop_reason, 0) + 1
        if len(records) >= width:
            commit(records[:])
            records.clear()

    if runnable:
        _decode_group(engine, [r[1] for r in runnable], [r[2] for r in runnable], finished)
    if records:
        commit(records)


def run_batch(
    engine: Engine,
    items: Iterable[BatchItem | ItemError],
    journal: Journal,
    *,
    width: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[str], None] | None = None,
) -> BatchSummary:
    """Run every item ``journal`` has not finished; ``on_progress(finished, total)`` after each group,
    ``on_record`` with each output line as it is written."""
    summary = BatchSummary(width=width, repaired_lines=journal.repair())
    done = journal.done_ids()
    pending: list[BatchItem] = []
    bad: list[dict[str, Any]] = []
    for item in items:
        summary.total += 1
        if item.id in done:
            summary.skipped += 1
        elif isinstance(item, ItemError):
            bad.append(_error_record(item.id, item.line_no, item.error))
        else:
            pending.append(item)
    started = time.perf_counter()
    finished = summary.skipped

    def commit(records: list[dict[str, Any]]) -> None:
        nonlocal finished
        for line in journal.commit(records):
            if on_record is not None:
                on_record(line)
        finished += len(records)
        summary.errors += sum("error" in r for r in records)
        if on_progress is not None:
            on_progress(finished, summary.total)

    if bad:
        commit(bad)
    width = max(1, width)
    batching = width > 1 and bool(getattr(engine, "batch_slots", None))
    # One at a time too: the KV cache keeps what the last prompt shares with the next (the file's
    # head), so a file's items in a row cost their own tails only.
    pending = _same_files_together(pending)
    window = width * (WINDOW if batching else 1)
    for start in range(0, len(pending), window):
        _run_window(engine, pending[start : start + window], width, summary, commit)
    summary.seconds = time.perf_counter() - started
    return summary
