"""From a model name (or .gguf path) to a loaded ``Engine``, with the model manager's checks first.

Resolution and verification belong to ``fimble.models``; this module only joins them to the engine so
that every front door loads a model the same way and gets the same actionable errors.
"""

from __future__ import annotations

from fimble.completion.engine import Engine, EngineConfig

__all__ = ["load_engine"]


def load_engine(
    model: str | None = None, *, threads: int = 0, n_ctx: int = 4096, batch_slots: int = 0
) -> Engine:
    """Resolve ``model`` (None: the registry's default), check it, and load it.

    Long-running servers then give it its warmer (``fimble.completion.warmup.attach_warmup``, which
    the engine worker calls: ``EngineWorker(warmup=...)``); one-shot commands and evaluations answer
    every request from the full prompt and leave it off.

    ``batch_slots``: KV sequences for ``Engine.generate_batch`` (``fimble batch --width``).

    Raises ``ModelNotFound``/``ModelCorrupt`` with the command that fixes it, ``ModelUnsupported`` for a
    model without FIM tokens.
    """
    from fimble.models import registry, store

    path = store.resolve(model or registry.default_name())
    # Sequences 0 and 1 are the interactive slot and its parking; batch slots come after them.
    return Engine(path, EngineConfig(threads=threads, n_ctx=n_ctx, n_seq_max=2 + batch_slots))
