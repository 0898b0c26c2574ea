"""The language server (`fimble serve`): pygls over stdio or TCP, one server object per connection."""

from __future__ import annotations

from fimble.server.lsp.server import FimbleServer, create_server

__all__ = ["FimbleServer", "create_server"]
