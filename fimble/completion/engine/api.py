"""What the rest of fimble needs of an engine, written down once: ``CompletionEngine``.

The completer, the service, the worker and the front doors call only these members, so any object
that has them can serve: the local llama.cpp ``Engine``, the ``RemoteEngine`` of an OpenAI-compatible
server, or a test's fake (``tests/fakes.py``). The local engine has more (KV snapshots and the disk
store, used by ``fimble.completion.warmup`` only when the engine is local; ``generate_batch``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.config import Generation, StopCheck
from fimble.completion.prompt.fim import FimTokens

if TYPE_CHECKING:
    from fimble.completion.engine.guide import Guide

__all__ = ["CompletionEngine"]


@runtime_checkable
class CompletionEngine(Protocol):
    """An engine the completer can run requests on (always from the one worker thread that owns it)."""

    model_path: Path  # identifies the model (cache keys, status, saved states)
    fim: FimTokens  # the model's FIM control tokens, placed by id in prompts
    n_ctx: int  # the context size prompts are budgeted to
    load_ms: float
    tokens_shifted: int  # KV cells moved instead of evaluated since load (0 where not tracked)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]: ...

    def detokenize(self, tokens: Sequence[int]) -> str: ...

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        """The tokens whose KV the engine holds for the next request (empty where unknown)."""
        ...

    def reset(self) -> None: ...

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int = 64,
        stop: StopCheck | None = None,
        cancel: CancelToken | None = None,
        on_text: Callable[[str], None] | None = None,
        reuse_limit: int = 0,
        guide: Guide | None = None,
    ) -> Generation: ...

    def close(self) -> None: ...
