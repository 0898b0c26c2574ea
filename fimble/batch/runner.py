"""Decode a batch's pending items on one engine, a group at a time, journaling each finished group.

Every item is planned exactly as the HTTP server plans a client's prompt (``plan_request``: fimble's
FIM layout, stop rules and clean-up), so an item's answer is what ``/v1/completions`` would return
for the same text. ``width`` items form a group; the group's records are journaled together, so a
SIGKILL loses at most the group under way. With ``width`` 1 every item is decoded alone; wider groups
use the engine's multi-sequence decoding when it has one (several KV sequences advanced per pass over
the weights), and are decoded one by one otherwise, with the same outputs either way.
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

__all__ = ["BatchSummary", "run_batch"]

log = logging.getLogger(__name__)


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
    engine: Engine, plans: Sequence[RawPlan], prompts: Sequence[FimPrompt | list[int]]
) -> list[Generation]:
    """One ``Generation`` per plan, in order: greedy, as if each were decoded alone.

    Where the engine has batch slots, the plans without a guide (guided decoding picks among choices
    token by token, alone) are decoded together in one ``generate_batch``, each with its own stop
    rules and ``max_tokens``: equal to decoding alone except after a near-tie
    (``BatchGeneration.near_ties``)."""
    together = [i for i, plan in enumerate(plans) if plan.guide is None]
    if len(together) < 2 or not getattr(engine, "batch_slots", None):
        return [_decode_one(engine, plan, prompt) for plan, prompt in zip(plans, prompts, strict=True)]
    batched = engine.generate_batch(
        [_tokens(prompts[i]) for i in together],
        max_tokens=max(plans[i].max_tokens for i in together),
        stops=[_stop_within(plans[i]) for i in together],
    )
    gens: dict[int, Generation] = dict(zip(together, batched, strict=True))
    return [gens[i] if i in gens else _decode_one(engine, p, prompts[i]) for i, p in enumerate(plans)]


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
    for start in range(0, len(pending), max(1, width)):
        group = pending[start : start + max(1, width)]
        records: list[dict[str, Any]] = []
        runnable: list[tuple[BatchItem, RawPlan, FimPrompt | list[int]]] = []
        for item in group:
            try:
                plan = plan_request(item.raw, item.options)
                runnable.append((item, plan, plan.build(engine)))
            except FimbleError as err:
                records.append(_error_record(item.id, item.line_no, str(err)))
        gens = _decode_group(engine, [r[1] for r in runnable], [r[2] for r in runnable]) if runnable else []
        for (item, plan, _), gen in zip(runnable, gens, strict=True):
            text = plan.final(gen.text)
            records.append(_record(item, text, gen))
            summary.done += 1
            summary.tokens_generated += len(gen.tokens)
            summary.near_ties += records[-1].get("near_ties", 0)
            summary.prompt_tokens += gen.prompt_tokens
            summary.stop_reasons[gen.stop_reason] = summary.stop_reasons.get(gen.stop_reason, 0) + 1
        commit(records)
    summary.seconds = time.perf_counter() - started
    return summary
