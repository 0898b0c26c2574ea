"""Fixtures for the HTTP tests: a live uvicorn server on 127.0.0.1 and an ephemeral port, a scripted
fake engine for the fast tests, and the real small model for the ``model``-marked ones."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

from fimble.completion.cancel import CancelToken
from fimble.completion.completer import Completer
from fimble.completion.engine import Generation
from fimble.completion.fim import FimTokens
from fimble.errors import Cancelled
from fimble.server.http import HttpSettings, create_app

# Fake control-token ids, far above any character code the fake tokenizer produces.
_FIM = FimTokens(
    family="qwen",
    prefix=1_000_001,
    suffix=1_000_002,
    middle=1_000_003,
    repo_name=1_000_004,
    file_sep=1_000_005,
)


@dataclass
class FakeEngine:
    """A scripted engine: one token per character, ``reply`` (or ``reply_for(prompt text)``) as output.

    ``delay`` seconds per token make generations slow enough to queue, cancel and disconnect from.
    Every prompt it saw is kept, decoded, in ``prompts``.
    """

    reply: str = "return 42"
    delay: float = 0.0
    n_ctx: int = 4096
    fim: FimTokens = _FIM
    prompts: list[str] = field(default_factory=list)
    reply_for: Callable[[str], str] | None = None
    cancelled: int = 0
    started: threading.Event = field(default_factory=threading.Event)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, tokens: Sequence[int]) -> str:
        names = {
            _FIM.prefix: "<PRE>",
            _FIM.suffix: "<SUF>",
            _FIM.middle: "<MID>",
            _FIM.repo_name: "<REPO>",
            _FIM.file_sep: "<SEP>",
        }
        return "".join(names.get(t) or chr(t) for t in tokens)

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int = 64,
        stop: Callable[[str], tuple[str, int] | None] | None = None,
        cancel: CancelToken | None = None,
        on_text: Callable[[str], None] | None = None,
        reuse_limit: int = 0,
        guide: object = None,
    ) -> Generation:
        text_prompt = self.detokenize(prompt)
        self.prompts.append(text_prompt)
        self.started.set()
        reply = self.reply_for(text_prompt) if self.reply_for else self.reply
        text, reason, n = "", "max_tokens", 0
        for ch in reply:
            if n >= max_tokens:
                break
            if cancel is not None and cancel.cancelled:
                reason = "cancelled"
                self.cancelled += 1
                break
            if self.delay:
                time.sleep(self.delay)
            text += ch
            n += 1
            if stop is not None and (hit := stop(text)) is not None:
                reason, keep = hit
                text = text[:keep]
                break
            if on_text is not None:
                on_text(text)
        else:
            reason = "eog" if n < max_tokens else "max_tokens"
        return Generation(text, tuple(range(n)), reason, len(prompt), len(prompt), 0, 1.0, 1.0)

    def close(self) -> None:
        pass


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
    completer: Completer
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
    completer = Completer(SMALL, threads=0, n_ctx=4096)
    assert completer.wait_ready(120), completer.load_error
    assert completer.load_error is None, completer.load_error
    with LiveServer(create_app(completer, settings or HttpSettings())) as live:
        yield Served(live, completer, completer.worker.engine)
    completer.close()
