"""fimble's HTTP front door: OpenAI, llama.cpp and Ollama compatible completion endpoints.

``serve_http`` runs it in the caller's event loop (``fimble serve --http HOST:PORT``, beside the LSP
server or alone), sharing the caller's ``Completer``; ``create_app`` builds the Starlette app for
tests and embedding.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from fimble.completion.completer import Completer
from fimble.server.exposure import check_bind
from fimble.server.http.app import create_app
from fimble.server.http.context import ContextSource
from fimble.server.http.settings import HttpSettings, settings_from_options

__all__ = ["HttpSettings", "create_app", "serve_http"]

log = logging.getLogger(__name__)


async def serve_http(
    completer: Completer,
    host: str,
    port: int,
    api_key: str | None = None,
    *,
    index: ContextSource | None = None,
    handle_signals: bool = True,
    allow_remote: bool = False,
    log_level: str = "warning",
    **options: Any,
) -> None:
    """Serve HTTP on ``host:port`` until cancelled (or, with ``handle_signals``, until SIGINT/SIGTERM).

    ``api_key`` falls back to ``FIMBLE_API_KEY``. ``options`` are ``HttpSettings`` fields
    (``max_queue``, ``max_body_bytes``, ``max_tokens_cap``, ``cors_origins``, ...); an unknown one is a
    ``ConfigError``. ``index`` (the process's ``IndexRunner``) adds fimble's repository context to
    every FIM request. Binding anything but loopback is refused (``ConfigError``) unless
    ``allow_remote`` is set and there is a key (``fimble.server.exposure``). Pass
    ``handle_signals=False`` when the caller owns signal handling.
    """
    import uvicorn

    settings = settings_from_options(api_key or os.environ.get("FIMBLE_API_KEY") or None, options)
    check_bind("http", host, port, allow_remote=allow_remote, api_key=settings.api_key)
    app = create_app(completer, settings, index=index)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )

    class Server(uvicorn.Server):
        def capture_signals(self):  # type: ignore[no-untyped-def]
            return super().capture_signals() if handle_signals else contextlib.nullcontext()

    server = Server(config)
    log.info("fimble HTTP on http://%s:%d", host, port)
    task = asyncio.ensure_future(server.serve())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:  # the caller stops us: close the sockets before going
        server.should_exit = True
        await task
        raise
