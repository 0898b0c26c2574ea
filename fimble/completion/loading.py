"""From a model name (or .gguf path) to a loaded ``Engine``, with the model manager's checks first.

Resolution and verification belong to ``fimble.models``; this module only joins them to the engine so
that every front door loads a model the same way and gets the same actionable errors.
"""

from __future__ import annotations

from fimble.completion.engine import Engine, EngineConfig

__all__ = ["attach_warmup", "load_engine"]


def load_engine(
    model: str | None = None, *, threads: int = 0, n_ctx: int = 4096, warmup: bool = False
) -> Engine:
    """Resolve ``model`` (None: the registry's default), check it, and load it.

    ``warmup``: attach the KV state store and the warmer (small first prompts, idle warm-up), as
    long-running servers want; one-shot commands and evaluations leave it off.

    Raises ``ModelNotFound``/``ModelCorrupt`` with the command that fixes it, ``ModelUnsupported`` for a
    model without FIM tokens.
    """
    from fimble.models import registry, store

    path = store.resolve(model or registry.default_name())
    engine = Engine(path, EngineConfig(threads=threads, n_ctx=n_ctx))
    if warmup:  # servers; one-shot commands and evaluations answer every request from the full prompt
        attach_warmup(engine)
    return engine


def attach_warmup(engine: Engine) -> None:
    """Give ``engine`` its KV state store on disk and its warmer (small first prompts, idle warm-up),
    as the settings in ``fimble.completion.warmup`` say."""
    from fimble.completion.kvstore import KVStore, state_dir
    from fimble.completion.warmup import Warmer, current_config

    config = current_config()
    if config.kv_state_mb > 0:
        engine.attach_store(KVStore(state_dir(engine.model_path), config.kv_state_mb << 20))
    engine.warmer = Warmer()
