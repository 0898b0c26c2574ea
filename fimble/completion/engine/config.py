"""The engine's value types: its configuration, what a generation reports, and the stop-check shape.

Kept apart from the llama.cpp code so front doors and reports can import them without the model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TIE_MARGIN", "BatchGeneration", "EngineConfig", "Generation", "StopCheck", "default_threads"]

# A greedy choice leading the runner-up by less than this (in logits) is not trusted: batched and
# single-token kernels round differently (see ``Decoder.step``), so such a choice can come out the other
# way when the same text is decoded in another batch shape.
TIE_MARGIN = 1.0

# Called with the text generated so far; returns (reason, keep) to stop, keeping text[:keep], or None.
StopCheck = Callable[[str], "tuple[str, int] | None"]


def default_threads() -> int:
    """Physical cores: llama.cpp gains nothing from SMT siblings and loses to contention."""
    try:
        import psutil

        return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)
    except Exception:  # pragma: no cover - psutil is a dependency, but never fail on this
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class EngineConfig:
    n_ctx: int = 4096
    n_batch: int = 512
    threads: int = 0  # 0 = physical cores
    reuse_min_chunk: int = 8  # shortest cached run worth moving instead of evaluating; 0 = prefix only
    # Shortest run of the file's lines above the cursor moved after a jump down the file (a FIM
    # prompt's prefix; ``kvplan.plan_reuse``'s ``lines_min_chunk``); 0 = never move them.
    lines_min_chunk: int = 64
    abort_min_tokens: int = 64  # shorter prompt evaluations run to the end when cancelled (not background)
    restore_min_gain: int = 32  # load a saved state only when it spares evaluating at least this many tokens
    # False: the weights are read into memory. A memory-mapped model file that is truncated or
    # overwritten in place while the server runs (``cp new.gguf model.gguf``) kills the process with
    # SIGBUS at the next token; read into memory, it keeps serving from what it loaded.
    use_mmap: bool = False
    speculative: bool = True  # check prompt-lookup drafts in batches (same greedy output, fewer steps)
    # KV sequences in the one llama.cpp context. Sequence 0 is the interactive slot, sequence 1 the
    # place it parks moved chunks (and copies a snapshot through); every further sequence is a batch
    # slot (``Engine.generate_batch``). The KV buffer is unified: all sequences share the same n_ctx
    # cells, so more sequences cost no memory, and a batch only gets the cells the interactive slot
    # leaves free (see ``fimble.completion.engine.batch``).
    n_seq_max: int = 2

    def __post_init__(self) -> None:
        if self.n_seq_max < 2:
            raise ValueError(
                f"n_seq_max must be at least 2 (the interactive slot and its parking), got {self.n_seq_max}"
            )


@dataclass(frozen=True)
class Generation:
    """What one request cost and produced; every front door reports these numbers."""

    text: str
    tokens: tuple[int, ...]
    stop_reason: str  # eog | newline | stop_rule:<name> | max_tokens | cancelled | context_full
    prompt_tokens: int
    tokens_evaluated: int
    tokens_reused: int
    prompt_ms: float
    generation_ms: float
    drafts: int = 0  # decoding steps that checked a draft (speculative decoding)
    drafted: int = 0  # draft tokens checked
    accepted: int = 0  # draft tokens the model agreed with (each spared one decoding step)
    guide: str = ""  # an import line's guide: "kept" to its choices, "released" to the model, "" none

    @property
    def tokens_per_s(self) -> float:
        """Effective generation speed: generated tokens over the generation time."""
        return len(self.tokens) / self.generation_ms * 1000 if self.generation_ms > 0 else 0.0

    @property
    def acceptance(self) -> float:
        """Share of drafted tokens accepted (0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0


@dataclass(frozen=True)
class BatchGeneration(Generation):
    """A generation decoded beside others in one batch (``Engine.generate_batch``)."""

    # Indices into ``tokens`` chosen by a lead under ``TIE_MARGIN``: there another batch shape (the
    # same prompt decoded alone) could have chosen otherwise, so outputs compared across shapes may
    # part from there.
    near_ties: tuple[int, ...] = ()
