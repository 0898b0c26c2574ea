"""`fimble serve`: the language server editors start (stdio by default, or TCP), optionally with HTTP."""

from __future__ import annotations

import click

from fimble.errors import InputError

__all__ = ["parse_address", "serve"]


def parse_address(value: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` (on 127.0.0.1); ``[::1]:PORT`` for IPv6. Port 0 picks a free one."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]") if sep else default_host
    try:
        number = int(port)
    except ValueError:
        raise InputError(f"expected HOST:PORT or PORT, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise InputError(f"port {number} is out of range (0-65535)")
    return host or default_host, number


@click.command()
@click.option("--stdio", is_flag=True, help="Speak LSP on stdin/stdout (the default).")
@click.option(
    "--tcp", "tcp", metavar="HOST:PORT", help="Speak LSP on a TCP socket instead (e.g. 127.0.0.1:2087)."
)
@click.option("--http", "http", metavar="HOST:PORT", help="Also serve the HTTP API, in the same process.")
@click.option("--api-key", envvar="FIMBLE_API_KEY", default=None, help="Key HTTP clients must send.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Let --http/--tcp bind an address other machines reach (HTTP also needs --api-key).",
)
@click.option("--no-lsp", is_flag=True, help="Serve HTTP only (with --http), e.g. as a background service.")
@click.option(
    "--backend",
    type=click.Choice(["local", "openai"]),
    default="local",
    show_default=True,
    help="Where generation runs: this process, or an OpenAI-compatible server (--backend-url).",
)
@click.option(
    "--backend-url",
    metavar="URL",
    help="With --backend openai: e.g. http://gpu-box:8080 (llama-server, vLLM).",
)
@click.option(
    "--backend-api-key", envvar="FIMBLE_BACKEND_API_KEY", default=None, help="Key for the backend server."
)
@click.option(
    "--model",
    "-m",
    envvar="FIMBLE_MODEL",
    default=None,
    help="Model name from `fimble models list`, or a .gguf path (env FIMBLE_MODEL).",
)
@click.option(
    "--threads", "-t", default=0, type=click.IntRange(0, 256), help="CPU threads (0: physical cores)."
)
@click.option(
    "--self-test",
    "self_test",
    metavar="PATH:LINE:COL",
    help="With --tcp: once listening, complete PATH at LINE:COL through the socket and print it on stderr.",
)
def serve(
    stdio: bool,
    tcp: str | None,
    http: str | None,
    api_key: str | None,
    allow_remote: bool,
    no_lsp: bool,
    backend: str,
    backend_url: str | None,
    backend_api_key: str | None,
    model: str | None,
    threads: int,
    self_test: str | None,
) -> None:
    """Run the fimble language server (inline completions, with a completion-item fallback).

    Editors start it as `fimble serve`. Logs go to stderr (-v, -vv for more); stdout carries only
    the protocol. The model loads in the background: until it is ready, requests get empty results.

    Example: fimble serve --tcp 127.0.0.1:2087 --self-test fimble/examples/dates.py:8:22
    """
    from fimble.server.lsp.main import ServeOptions, run

    if stdio and tcp:
        raise click.UsageError("choose --stdio or --tcp, not both")
    if no_lsp and (stdio or tcp):
        raise click.UsageError("--no-lsp serves HTTP only: drop --stdio/--tcp")
    if (backend == "openai") != (backend_url is not None):
        raise click.UsageError("--backend openai and --backend-url URL go together")
    test = None
    if self_test is not None:
        from fimble.commands.complete import offset_of, parse_location, read_source
        from fimble.server.lsp.selftest import SelfTest

        path, line, col = parse_location(self_test)
        text = read_source(path)
        offset_of(text, line, col, path)  # checks the location exists
        test = SelfTest(path=path, text=text, line=line, column=col, language=_language(path.suffix))
    options = ServeOptions(
        model=model,
        threads=threads,
        tcp=parse_address(tcp) if tcp else None,
        http=parse_address(http) if http else None,
        api_key=api_key,
        allow_remote=allow_remote,
        self_test=test,
        lsp=not no_lsp,
        backend_url=backend_url,
        backend_api_key=backend_api_key,
    )
    raise SystemExit(run(options))


_LANGUAGE_IDS = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".cpp": "cpp",
}


def _language(suffix: str) -> str:
    return _LANGUAGE_IDS.get(suffix, "plaintext")
