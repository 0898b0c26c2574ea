"""``serve_http``: the entry point ``fimble serve --http`` calls, on a real socket."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from fimble.completion.completer import Completer
from fimble.errors import ConfigError
from fimble.server.exposure import check_bind, is_loopback
from fimble.server.http import HttpSettings, serve_http
from fimble.server.http.settings import settings_from_options
from tests.server.http.conftest import FakeEngine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_serve_http_serves_until_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIMBLE_API_KEY", "from-env")
    completer = Completer("fake-coder-1.5b", load=FakeEngine)  # type: ignore[arg-type]
    port = free_port()
    task = asyncio.ensure_future(serve_http(completer, "127.0.0.1", port, handle_signals=False, max_queue=3))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(200):
                try:
                    health = await client.get("/health")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            assert health.status_code == 200
            denied = await client.get("/v1/models")
            allowed = await client.get("/v1/models", headers={"Authorization": "Bearer from-env"})
            metrics = await client.get("/metrics", headers={"Authorization": "Bearer from-env"})
        assert denied.status_code == 401 and allowed.status_code == 200
        assert "fimble_queue_limit 3" in metrics.text
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        completer.close()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass  # the socket is closed once serve_http returns


def test_unknown_or_bad_options_name_the_option() -> None:
    with pytest.raises(ConfigError, match="max_queu"):
        settings_from_options(None, {"max_queu": 3})
    with pytest.raises(ConfigError, match="max_queue"):
        settings_from_options(None, {"max_queue": 0})
    with pytest.raises(ConfigError, match="empty"):
        HttpSettings(api_key=" ")


def test_a_bind_off_loopback_needs_allow_remote_and_a_key() -> None:
    check_bind("http", "127.0.0.1", 8080, allow_remote=False, api_key=None)
    check_bind("http", "0.0.0.0", 8080, allow_remote=True, api_key="k")
    check_bind("lsp", "0.0.0.0", 2087, allow_remote=True, api_key=None)
    with pytest.raises(ConfigError, match=r"add --allow-remote and --api-key KEY"):
        check_bind("http", "0.0.0.0", 8080, allow_remote=False, api_key=None)
    with pytest.raises(ConfigError, match=r"add --allow-remote \(or"):
        check_bind("http", "192.168.1.4", 8080, allow_remote=False, api_key="k")
    with pytest.raises(ConfigError, match=r"add --api-key KEY"):
        check_bind("http", "::", 8080, allow_remote=True, api_key=None)
    with pytest.raises(ConfigError, match="LSP has no authentication"):
        check_bind("lsp", "0.0.0.0", 2087, allow_remote=False, api_key="k")


async def test_serve_http_refuses_an_exposed_bind_before_listening() -> None:
    completer = Completer("fake-coder-1.5b", load=FakeEngine)  # type: ignore[arg-type]
    try:
        with pytest.raises(ConfigError, match=r"refusing to serve HTTP on 0\.0\.0\.0"):
            await serve_http(completer, "0.0.0.0", free_port(), handle_signals=False)
    finally:
        completer.close()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.5.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("0.0.0.0", False), ("192.168.1.4", False), ("example.org", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
