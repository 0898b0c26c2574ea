"""`fimble serve` options that combine transports and backends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from fimble.commands.serve import serve


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-lsp"], "--no-lsp leaves nothing to serve"),
        (["--no-lsp", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"], "--no-lsp serves HTTP only"),
        (
            ["--backend", "openai", "--http", "127.0.0.1:0"],
            "--backend openai and --backend-url URL go together",
        ),
        (["--backend-url", "http://x", "--http", "127.0.0.1:0"], "go together"),
    ],
)
def test_contradictory_options_are_refused(args: list[str], message: str) -> None:
    result = CliRunner().invoke(serve, args)
    assert result.exit_code != 0
    assert message in result.output + str(result.exception)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-lsp", "--http", "0.0.0.0:{port}"], "refusing to serve HTTP on 0.0.0.0"),
        (["--no-lsp", "--http", "0.0.0.0:{port}", "--allow-remote"], "add --api-key KEY"),
        (["--no-lsp", "--http", "0.0.0.0:{port}", "--api-key", "k"], "add --allow-remote"),
        (["--tcp", "0.0.0.0:{port}", "--api-key", "k"], "the LSP has no authentication"),
    ],
)
def test_an_exposed_bind_is_refused_before_anything_listens(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Off loopback, the server needs --allow-remote (and, for HTTP, a key): one line, exit 1, no socket."""
    port = _free_port()
    env = {**os.environ, "FIMBLE_HOME": str(tmp_path)}
    env.pop("FIMBLE_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "fimble", "serve", *(a.format(port=port) for a in args)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    with socket.socket() as probe:  # nothing was bound: the port is still free
        probe.bind(("127.0.0.1", port))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_only_runs_without_stdin(tmp_path: Path) -> None:
    """As a service (stdin at /dev/null) with --no-lsp: HTTP answers, and no stdio transport is started."""
    port = _free_port()
    env = {**os.environ, "FIMBLE_HOME": str(tmp_path)}  # no model there: /health reports the fix
    proc = subprocess.Popen(
        [sys.executable, "-m", "fimble", "serve", "--no-lsp", "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        body = None
        for _ in range(100):
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                body = response.json()
                if "fimble models pull" in str(body):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        assert body is not None and "fimble models pull" in str(body)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert b"Traceback" not in err
    assert b"PermissionError" not in err
