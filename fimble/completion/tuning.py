"""What one client may tune of how its own requests run on the engine every client shares.

Settings a client sends travel with its requests (``CompletionRequest.tuning``), like its token
budgets and ``multiline`` already did, instead of being written into the engine: one server serves
several editors (LSP connections, HTTP beside them) from one model, and nothing one of them sends may
change how another's requests run.

Per request (here): speculative decoding, and the cold-place first prompt (``first_ms``,
``first_tokens``). Process-wide, and so server options rather than a client's: the model and its
threads (one model is loaded per process; a client asking for another switches it for all, as
``fimble.server.shared`` says), the size of the KV state store on disk (``kvStateMb``: one store per
model directory) and the engine's own defaults, which requests without tuning use (HTTP clients,
the CLI, evaluations).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Tuning"]


@dataclass(frozen=True)
class Tuning:
    """A client's choices for its requests; the defaults are the server's (``Settings``)."""

    speculative: bool = True  # prompt-lookup drafts checked in batches: same output, fewer steps
    first_ms: int = 1600  # a cold place's latency target: a smaller first prompt (0: always the full one)
    first_tokens: int = 384  # the least a cold place's first prompt reads
