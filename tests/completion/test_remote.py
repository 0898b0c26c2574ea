"""The remote backend against a real OpenAI-compatible server (``python -m llama_cpp.server``, started
here on 127.0.0.1), through the Completer and the HTTP front door; plus a backend that is down and
one that is too slow."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from fimble.completion.completer import Completer
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.remote import RemoteConfig, RemoteEngine
from fimble.completion.prompt.fim import build_prompt
from fimble.errors import BackendError, ConfigError
from fimble.server.http import HttpSettings, create_app
from tests.model_paths import SMALL, model_path
from tests.server.http.conftest import LiveServer

pytestmark = pytest.mark.model


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ``python -m MODULE ARGS`` on the CPU path fimble's probe chose for the --model (one that does not
# crash here): llama-cpp-python's own loader reads the same verdict as fimble's engine.
LAUNCH_ON_CPU_PATH = """
import runpy, sys
from fimble.models import cpu_path
verdict = cpu_path.verdict_for(sys.argv[sys.argv.index("--model") + 1])
if verdict.path is None:
    sys.exit(verdict.problem())
cpu_path.apply_to_process(verdict.path)
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def backend() -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on the small model."""
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"fimble-llama-server-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCH_ON_CPU_PATH, "llama_cpp.server", "--model", str(model_path(SMALL)),
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "false"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def remote(url: str, **kwargs: object) -> RemoteEngine:
    return RemoteEngine(RemoteConfig(url=url, n_ctx=2048, **kwargs), model_path(SMALL))  # type: ignore[arg-type]


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="http"):
        RemoteConfig(url="gpu-box:8080")
    assert RemoteConfig(url="http://h:1/v1/").endpoint == "http://h:1/v1/completions"
    assert RemoteConfig(url="http://h:1").endpoint == "http://h:1/v1/completions"


def test_remote_engine_completes_a_fim_prompt(backend: str) -> None:
    engine = remote(backend)
    try:
        assert engine.fim.family == "qwen" and engine.fim.repo_level
        prompt = build_prompt(engine.tokenize, engine.fim, "def add(a, b):\n    return ", "\n").tokens
        seen: list[str] = []
        gen = engine.generate(prompt, max_tokens=16, on_text=seen.append)
        assert gen.text.strip().startswith("a + b"), gen
        assert gen.stop_reason in ("eog", "max_tokens") and seen
    finally:
        engine.close()


def test_prompt_as_token_ids_and_local_stop_rules() -> None:
    """llama-server and vLLM take token ids: then file text can never become a control token."""
    bodies: list[dict[str, object]] = []

    async def completions(request: Request) -> StreamingResponse:
        bodies.append(await request.json())

        async def events() -> AsyncIterator[str]:
            for text in ("x = 1", "\ny = 2", "\nz = 3"):
                yield "data: " + json.dumps({"choices": [{"text": text, "finish_reason": None}]}) + "\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    stub = Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])])
    with LiveServer(stub) as live:
        engine = remote(live.url, prompt_format="tokens", model="coder")
        try:
            prompt = build_prompt(engine.tokenize, engine.fim, "s = '<|fim_middle|>'\n", "\n").tokens
            gen = engine.generate(
                prompt, max_tokens=8, stop=lambda t: ("newline", t.index("\n")) if "\n" in t else None
            )
        finally:
            engine.close()
    assert bodies[0]["prompt"] == prompt and bodies[0]["model"] == "coder"
    assert prompt.count(engine.fim.middle) == 1  # the file's "<|fim_middle|>" stayed text
    assert "<|file_sep|>" in bodies[0]["stop"]  # type: ignore[operator]
    assert (gen.text, gen.stop_reason) == ("x = 1", "newline")


def test_http_front_door_over_the_remote_backend(backend: str) -> None:
    completer = Completer(SMALL, load=lambda: remote(backend))  # type: ignore[arg-type, return-value]
    assert completer.wait_ready(30), completer.load_error
    try:
        with LiveServer(create_app(completer, HttpSettings())) as live, live.client() as client:
            fim = client.post(
                "/v1/completions",
                json={"prompt": "def add(a, b):\n    return ", "suffix": "\n", "max_tokens": 16},
            )
            infill = client.post(
                "/infill",
                json={
                    "input_prefix": "def mul(a, b):\n",
                    "prompt": "    return ",
                    "input_suffix": "\n",
                    "n_predict": 16,
                },
            )
            with client.stream(
                "POST",
                "/completion",
                json={"prompt": "# add two numbers\ndef add(a, b):\n", "n_predict": 12, "stream": True},
            ) as r:
                events = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert fim.status_code == 200 and fim.json()["choices"][0]["text"] == "a + b"
        assert infill.status_code == 200 and infill.json()["content"] == "a * b"
        assert len(events) >= 2 and '"stop": true' in events[-1]
        assert completer.stats().completed == 3
    finally:
        completer.close()


def test_backend_down_is_a_clear_502_and_nothing_sticks() -> None:
    completer = Completer(SMALL, load=lambda: remote(f"http://127.0.0.1:{free_port()}"))  # type: ignore[arg-type, return-value]
    assert completer.wait_ready(30)
    try:
        with LiveServer(create_app(completer, HttpSettings(max_queue=1))) as live, live.client() as client:
            for _ in range(3):  # a stuck request would hold the single queue slot: 429
                r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 4, "stream": True})
                assert r.status_code == 502, r.text
                assert "not reachable" in r.json()["error"]["message"]
                assert "--backend-url" in r.json()["error"]["message"]
    finally:
        completer.close()


def test_slow_backend_times_out_with_a_clear_error() -> None:
    release = threading.Event()

    async def slow(request: Request) -> JSONResponse:
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
        return JSONResponse({"choices": [{"text": "late", "finish_reason": "stop"}]})

    stub = Starlette(routes=[Route("/v1/completions", slow, methods=["POST"])])
    with LiveServer(stub) as backend_live:
        completer = Completer(SMALL, load=lambda: remote(backend_live.url, timeout_s=0.5))  # type: ignore[arg-type, return-value]
        assert completer.wait_ready(30)
        try:
            with LiveServer(create_app(completer, HttpSettings())) as live, live.client() as client:
                started = time.monotonic()
                r = client.post("/completion", json={"prompt": "x", "n_predict": 4})
                assert time.monotonic() - started < 10
            assert r.status_code == 502
            assert "did not answer within 0.5 s" in r.json()["error"]["message"]
        finally:
            release.set()
            completer.close()


def test_backend_errors_are_backend_errors() -> None:
    engine = remote(f"http://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(BackendError, match="not reachable"):
            engine.generate(engine.tokenize("x"), max_tokens=2)
    finally:
        engine.close()


def test_cancel_closes_the_stream() -> None:
    async def completions(request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            for _ in range(100):
                yield "data: " + json.dumps({"choices": [{"text": "a", "finish_reason": None}]}) + "\n\n"
                await asyncio.sleep(0.1)

        return StreamingResponse(events(), media_type="text/event-stream")

    stub = Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])])
    with LiveServer(stub) as live:
        engine = remote(live.url)
        cancel = CancelToken()
        try:
            started = time.monotonic()
            gen = engine.generate(
                engine.tokenize("x"), max_tokens=100, cancel=cancel, on_text=lambda t: cancel.cancel()
            )
        finally:
            engine.close()
    assert gen.stop_reason == "cancelled" and gen.text == "a"
    assert time.monotonic() - started < 5  # not the 10 s the whole stream takes
