"""What one ``fimble serve`` process shares between its connections: model, index, acceptance log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fimble.server.acceptance import AcceptanceLog
from fimble.server.index_runner import IndexHook, IndexRunner
from fimble.server.shared import SharedCompleter
from fimble.server.workspace_roots import WorkspaceIndexes

__all__ = ["ServeContext"]


@dataclass
class ServeContext:
    completer: SharedCompleter
    index: IndexRunner
    acceptance: AcceptanceLog = field(default_factory=AcceptanceLog)
    model: str | None = None  # what `--model` asked for; a client's `model` setting overrides it
    threads: int = 0

    @classmethod
    def create(
        cls,
        model: str | None = None,
        threads: int = 0,
        index: IndexHook | None = None,
        backend_url: str | None = None,
        backend_api_key: str | None = None,
    ) -> ServeContext:
        """Start loading the model right away (on the engine thread) while the editor initializes.

        With ``backend_url`` generation runs on an OpenAI-compatible server (llama-server, vLLM) while
        the tokenizer, prompt layout, index and caches stay here.
        """
        hook = index or WorkspaceIndexes()  # a persistent, watched index per workspace folder
        factory = None
        if backend_url is not None:
            from fimble.completion.completer import Completer
            from fimble.completion.engine.remote import load_remote_engine

            def factory(m: str | None, t: int, after: Callable[[], object] | None) -> Completer:
                return Completer(
                    m,
                    threads=t,
                    busy=hook,
                    load=lambda: load_remote_engine(backend_url, m, api_key=backend_api_key),
                    after=after,
                )

        return cls(
            completer=SharedCompleter(model, threads, factory=factory, busy=hook),
            index=IndexRunner(hook),
            model=model,
            threads=threads,
        )

    def close(self) -> None:
        self.index.close()
        self.completer.close()
