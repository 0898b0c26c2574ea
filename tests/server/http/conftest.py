"""Fixtures for the HTTP tests: a live uvicorn server on 127.0.0.1 and an ephemeral port, a scripted
fake engine for the fast tests (``tests.fakes``), and the real small model for the ``model``-marked ones."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from fimble.completion.completer import Completer
from fimble.errors import Cancelled
from fimble.server.http import HttpSettings, create_app
from fimble.server.shared import SharedCompleter
from tests.fakes import FakeEngine


class LiveServer:
    """uvicorn serving ``app`` from a thread on 127.0.0.1 and a port the OS picked."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 180), **kwargs)


@dataclass
class Served:
    """A running server with its completer, engine and URL."""

    live: LiveServer
    completer: Completer | SharedCompleter
    engine: Any

    @property
    def url(self) -> str:
        return self.live.url

    def client(self, **kwargs: Any) -> httpx.Client:
        return self.live.client(**kwargs)


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """``serve(engine=FakeEngine(...), settings=HttpSettings(...), load=...)`` -> a live server."""
    started: list[tuple[LiveServer, Completer]] = []

    def make(
        engine: Any | None = None,
        settings: HttpSettings | None = None,
        load: Callable[[], Any] | None = None,
        index: Any | None = None,
    ) -> Served:
        engine = engine if engine is not None else FakeEngine()
        completer = Completer("fake-coder-1.5b", load=load or (lambda: engine))
        if load is None:
            assert completer.wait_ready(10)
        live = LiveServer(create_app(completer, settings or HttpSettings(), index=index)).__enter__()
        started.append((live, completer))
        return Served(live, completer, engine)

    yield make
    for live, completer in started:
        live.__exit__()
        completer.close()


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


__all__ = ["Cancelled", "FakeEngine", "LiveServer", "Served", "serve_model", "wait_for"]


def serve_model(settings: HttpSettings | None = None) -> Iterator[Served]:
    """The real small model behind a live server (use from a module-scoped fixture: one load each)."""
    from tests.model_paths import SMALL, model_path

    model_path(SMALL)  # fails with the fix if `make models` was skipped
    completer = SharedCompleter(SMALL)  # what `fimble serve` wires the HTTP app to
    assert completer.wait_ready(120), completer.load_error
    assert completer.load_error is None, completer.load_error
    with LiveServer(create_app(completer, settings or HttpSettings())) as live:
        yield Served(live, completer, completer.worker.engine)
    completer.close()
