"""``fimble serve`` end to end: context, transports, optional HTTP and self-test, in one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from dataclasses import dataclass

from fimble.errors import ConfigError, FimbleError
from fimble.server.context import ServeContext
from fimble.server.exposure import check_bind
from fimble.server.lsp import transport
from fimble.server.lsp.selftest import SelfTest, run_self_test

__all__ = ["ServeOptions", "run"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    model: str | None = None
    threads: int = 0
    tcp: tuple[str, int] | None = None  # None: stdio
    http: tuple[str, int] | None = None
    api_key: str | None = None
    allow_remote: bool = False  # let --http/--tcp bind a non-loopback address (``fimble.server.exposure``)
    self_test: SelfTest | None = None
    lsp: bool = True  # False: HTTP only (no stdio LSP), for running as a service
    backend_url: str | None = None  # generate on an OpenAI-compatible server instead of locally
    backend_api_key: str | None = None


def _say(message: str) -> None:
    """A line for the person who started the server (stderr: stdout may be the protocol)."""
    print(f"fimble: {message}", file=sys.stderr, flush=True)


async def _self_test(host: str, port: int, test: SelfTest) -> None:
    where = f"{test.path}:{test.line}:{test.column}"
    _say(f"self-test: completing {where} through the LSP socket (waiting for the model)")
    try:
        text = await run_self_test(host, port, test)
    except FimbleError as err:
        raise FimbleError(f"self-test at {where} failed: {err}") from None
    _say(f"self-test: {where} -> {text!r}")
    _say(f"ready: LSP on {host}:{port}; connect an editor, Ctrl-C to stop")


async def _tcp(ctx: ServeContext, options: ServeOptions, tasks: list[asyncio.Future[object]]) -> None:
    assert options.tcp is not None
    loop = asyncio.get_running_loop()
    listening: asyncio.Future[tuple[str, int]] = loop.create_future()
    server = asyncio.ensure_future(
        transport.serve_tcp(ctx, *options.tcp, on_listening=lambda h, p: listening.set_result((h, p)))
    )
    tasks.append(server)
    await asyncio.wait({server, listening}, return_when=asyncio.FIRST_COMPLETED)
    if server.done():
        server.result()  # raises the listen error
    host, port = listening.result()
    _say(f"LSP server listening on {host}:{port}")
    if options.self_test is not None:
        tasks.append(asyncio.ensure_future(_self_test(host, port, options.self_test)))


async def _main(options: ServeOptions, stdio: tuple[object, object] | None) -> int:
    ctx = ServeContext.create(
        options.model,
        options.threads,
        backend_url=options.backend_url,
        backend_api_key=options.backend_api_key,
    )
    tasks: list[asyncio.Future[object]] = []
    try:
        if options.http is not None:
            serving = transport.serve_http(ctx, *options.http, options.api_key, options.allow_remote)
            tasks.append(asyncio.ensure_future(serving))
            _say(f"HTTP server on http://{options.http[0]}:{options.http[1]}")
        lsp = None
        if options.tcp is not None:
            await _tcp(ctx, options, tasks)
        elif options.lsp:
            assert stdio is not None
            lsp = asyncio.ensure_future(transport.serve_stdio(ctx, *stdio))  # type: ignore[arg-type]
            tasks.append(lsp)
        while True:  # until stdio ends, or a server (or the self-test) fails
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                tasks.remove(task)
                code = task.result()  # raises what failed
                if task is lsp:
                    return int(code or 0)
            if not tasks:
                return 0
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(ctx.close)


def _http_key(options: ServeOptions) -> str | None:
    """The key HTTP will require: ``--api-key``, else ``FIMBLE_API_KEY`` (as ``serve_http`` reads it)."""
    return options.api_key or os.environ.get("FIMBLE_API_KEY") or None


def run(options: ServeOptions) -> int:
    """Run the server until the client exits (stdio) or Ctrl-C (TCP); returns the exit code."""
    if options.self_test is not None and options.tcp is None:
        raise ConfigError("--self-test needs --tcp HOST:PORT (the test connects to the server's socket)")
    if not options.lsp and options.http is None:
        raise ConfigError("--no-lsp leaves nothing to serve: add --http HOST:PORT")
    # Before the model loads: a bind the user did not mean fails in a second, not after a minute.
    if options.http is not None:
        check_bind("http", *options.http, allow_remote=options.allow_remote, api_key=_http_key(options))
    if options.tcp is not None:
        check_bind("lsp", *options.tcp, allow_remote=options.allow_remote, api_key=None)
    stdio = transport.protect_stdout() if options.tcp is None and options.lsp else None
    try:
        code = asyncio.run(_main(options, stdio))
    except KeyboardInterrupt:
        code = 130
    if stdio is not None:
        # The stdin reader may sit in a thread blocked on a pipe the client keeps open: leave now.
        sys.stderr.flush()
        os._exit(code)
    return code
