"""Load, correctness only (``bench/load.py`` measures): a few seconds of typing at 50 keystrokes a
second with every keystroke cancelling the last, then 16 HTTP clients at once, some hanging up
mid-stream, on one real ``fimble serve`` with the 0.5B model. Every request is answered (a result,
the cancelled error, or 429 with Retry-After) and the server ends with no more threads or open files
than a stated bound over where it started."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.reliability.load import LoadServer, http_clients, resources, typing_session
from tests.server.lsp.conftest import env, model_path

pytestmark = pytest.mark.model

THREAD_SLACK = 4  # pools that start lazily (a retrieval thread, an HTTP worker) may appear once
FD_SLACK = 8


def test_typing_and_concurrent_clients_are_all_answered_without_leaks(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "config.py").write_text("DEFAULTS = {'retries': 3}\n")
    with open(tmp_path / "server.log", "wb") as log:
        server = LoadServer(model_path(), root, tmp_path / "home", env(tmp_path / "home"), log)
        try:
            typing_session(server, 50, 1.0, name="warm.py")  # lazily started threads start here
            http_clients(server.url, 4, 1.0)
            time.sleep(1)
            start = resources(server.pid)
            typing = typing_session(server, 50, 4.0)
            assert typing["answered"] == typing["keystrokes"] and typing["errors"] == 0, typing
            http = http_clients(server.url, 16, 4.0)
            assert http.ok > 0 and not http.other and http.refused_without_retry_after == 0, http
            time.sleep(2)  # connections closed by the clients are released
            end = resources(server.pid)
        finally:
            code = server.close()
    assert code == 0, (tmp_path / "server.log").read_text()[-3000:]
    assert end.threads <= start.threads + THREAD_SLACK, (start, end)
    assert end.fds <= start.fds + FD_SLACK, (start, end)
