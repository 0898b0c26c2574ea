"""LSP features, one module per concern; each module's ``register`` adds its handlers to a server.

``create_server`` lives here, not beside ``FimbleServer``: the handlers import the server class, so
the server module must not import them back.
"""

from __future__ import annotations

from collections.abc import Callable

from fimble.server.context import ServeContext
from fimble.server.lsp.handlers import acceptance, commands, config, focus, inline, lifecycle, sync
from fimble.server.lsp.server import FimbleServer

__all__ = ["create_server", "register_all"]


def register_all(server: FimbleServer) -> None:
    # textDocument/completion is registered during initialize, once the client's capabilities are known.
    for module in (lifecycle, sync, config, inline, focus, commands, acceptance):
        module.register(server)


def create_server(ctx: ServeContext, on_exit: Callable[[int], None] | None = None) -> FimbleServer:
    """One server object for one client connection, with every feature registered."""
    server = FimbleServer(ctx, on_exit)
    register_all(server)
    return server
