"""The language server (`fimble serve`): pygls over stdio or TCP, one server object per connection."""

from __future__ import annotations

from fimble.server.lsp.handlers import create_server
from fimble.server.lsp.server import FimbleServer

__all__ = ["FimbleServer", "create_server"]
