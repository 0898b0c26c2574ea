"""From a model name (or .gguf path) to a loaded ``Engine``, with the model manager's checks first.

Resolution and verification belong to ``fimble.models``; this module only joins them to the engine so
that every front door loads a model the same way and gets the same actionable errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fimble.completion.engine import Engine, EngineConfig

if TYPE_CHECKING:
    from fimble.completion.warmup import Warmer

__all__ = ["attach_warmup", "load_engine"]


def load_engine(model: str | None = None, *, threads: int = 0, n_ctx: int = 4096) -> Engine:
    """Resolve ``model`` (None: the registry's default), check it, and load it.

    Long-running servers then give it its warmer (``attach_warmup``, which the engine worker calls:
    ``EngineWorker(warmup=...)``); one-shot commands and evaluations answer every request from the
    full prompt and leave it off.

    Raises ``ModelNotFound``/``ModelCorrupt`` with the command that fixes it, ``ModelUnsupported`` for a
    model without FIM tokens.
    """
    from fimble.models import registry, store

    path = store.resolve(model or registry.default_name())
    return Engine(path, EngineConfig(threads=threads, n_ctx=n_ctx))


def attach_warmup(engine: Engine) -> Warmer:
    """Give ``engine`` its KV state store on disk, as the settings in ``fimble.completion.warmup``
    say, and return the warmer (small first prompts, idle warm-up) for the worker that owns it."""
    from fimble.completion.kvstore import KVStore, state_dir
    from fimble.completion.warmup import Warmer, current_config

    config = current_config()
    if config.kv_state_mb > 0:
        engine.attach_store(KVStore(state_dir(engine.model_path), config.kv_state_mb << 20))
    return Warmer()
