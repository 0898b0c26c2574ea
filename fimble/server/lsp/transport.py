"""Running the language server: stdio or TCP, optionally with the HTTP server in the same event loop.

Over stdio, file descriptor 1 belongs to the protocol: it is duplicated for the protocol's writer,
and fd 1 itself is pointed at stderr, so a stray ``print`` or a C library writing to stdout cannot
corrupt the message stream. Over TCP every connection gets its own ``FimbleServer`` (documents,
settings) on the process-wide ``ServeContext`` (model, index), and one client's ``exit`` closes
only its connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async

from fimble.errors import ConfigError
from fimble.server.context import ServeContext
from fimble.server.lsp.handlers import create_server
from fimble.server.lsp.server import FimbleServer

__all__ = ["protect_stdout", "serve_http", "serve_stdio", "serve_tcp"]

log = logging.getLogger(__name__)


def protect_stdout() -> tuple[BinaryIO, BinaryIO]:
    """Take stdin/stdout for the protocol and send everything else written to stdout to stderr."""
    sys.stdout.flush()
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, proto_out


async def _pipe_reader(stdin: BinaryIO) -> Any:
    """A non-blocking reader for a pipe (cancellable); a thread-backed one for anything else."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except (ValueError, OSError):
        return StdinAsyncReader(stdin)
    return reader


def _cancel_requests(server: FimbleServer) -> None:
    """The client is gone: stop its running completions (their handlers cancel their jobs)."""
    server.background.cancel_all()
    for future in list(server.protocol._request_futures.values()):
        future.cancel()


async def _run_connection(server: FimbleServer, reader: Any, stop: threading.Event) -> None:
    try:
        await run_async(
            stop_event=stop,
            reader=reader,
            protocol=server.protocol,
            logger=log,
            error_handler=server._report_server_error,
        )
    finally:
        _cancel_requests(server)


async def serve_stdio(ctx: ServeContext, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Serve one client on stdin/stdout until it sends ``exit`` or closes stdin; returns the exit code."""
    stop = threading.Event()
    code = 0
    task: asyncio.Task[None] | None = None

    def on_exit(exit_code: int) -> None:
        nonlocal code
        code = exit_code
        stop.set()
        if task is not None:
            task.cancel()

    server = create_server(ctx, on_exit)
    server.protocol.set_writer(StdoutWriter(stdout))
    reader = await _pipe_reader(stdin)
    task = asyncio.ensure_future(_run_connection(server, reader, stop))
    try:
        await task
    except asyncio.CancelledError:
        if not stop.is_set():
            raise
    log.info("stdio client finished (exit code %d)", code)
    return code


async def serve_tcp(
    ctx: ServeContext, host: str, port: int, on_listening: Callable[[str, int], None] | None = None
) -> None:
    """Accept LSP clients on ``host:port`` until cancelled."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        log.info("LSP client connected from %s", peer)
        stop = threading.Event()

        def on_exit(_code: int) -> None:
            stop.set()
            writer.close()

        server = create_server(ctx, on_exit)
        server.protocol.set_writer(writer)  # type: ignore[arg-type]
        try:
            await _run_connection(server, reader, stop)
        except (ConnectionError, asyncio.IncompleteReadError) as err:
            log.info("LSP client %s went away: %s", peer, err)
        finally:
            writer.close()
            log.info("LSP client %s disconnected", peer)

    try:
        srv = await asyncio.start_server(connection, host, port)
    except OSError as err:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {err.strerror}; pick another --tcp port"
        ) from None
    bound_host, bound_port = srv.sockets[0].getsockname()[:2]
    log.info("LSP server listening on %s:%d", bound_host, bound_port)
    if on_listening is not None:
        on_listening(bound_host, bound_port)
    async with srv:
        await srv.serve_forever()


def serve_http(
    ctx: ServeContext, host: str, port: int, api_key: str | None, allow_remote: bool = False
) -> Awaitable[None]:
    """The HTTP server (``fimble.server.http``) on the same completer, imported only when asked for."""
    try:
        from fimble.server.http import serve_http as http_main
    except ImportError as err:
        raise ConfigError(
            f"--http needs the HTTP server's dependencies ({err.name or err}): "
            "install them with `pip install 'fimble[http]'`"
        ) from None
    # Ctrl-C stops the whole process, LSP included; HTTP clients get the same index context as editors.
    return http_main(
        ctx.completer,  # type: ignore[arg-type]
        host,
        port,
        api_key,
        index=ctx.index,  # type: ignore[arg-type]
        handle_signals=False,
        allow_remote=allow_remote,
    )
