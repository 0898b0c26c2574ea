"""What one ``fimble serve`` process shares between its connections: model, index, acceptance log."""

from __future__ import annotations

from dataclasses import dataclass, field

from fimble.server.acceptance import AcceptanceLog
from fimble.server.shared import SharedCompleter
from fimble.server.workspace_index import IndexHook, IndexRunner, default_index

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
        cls, model: str | None = None, threads: int = 0, index: IndexHook | None = None
    ) -> ServeContext:
        """Start loading the model right away (on the engine thread) while the editor initializes."""
        return cls(
            completer=SharedCompleter(model, threads),
            index=IndexRunner(index or default_index()),
            model=model,
            threads=threads,
        )

    def close(self) -> None:
        self.index.close()
        self.completer.close()
