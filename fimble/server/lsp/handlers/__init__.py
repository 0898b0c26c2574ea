"""LSP features, one module per concern; each module's ``register`` adds its handlers to a server."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["register_all"]


def register_all(server: FimbleServer) -> None:
    from fimble.server.lsp.handlers import acceptance, commands, config, focus, inline, lifecycle, sync

    # textDocument/completion is registered during initialize, once the client's capabilities are known.
    for module in (lifecycle, sync, config, inline, focus, commands, acceptance):
        module.register(server)
