"""OpenAI endpoints with the real ``openai`` client and Continue's ``openai`` provider body
(core/llm/llms/OpenAI.ts ``_legacystreamComplete``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from fimble.server.http import HttpSettings
from tests.server.http.conftest import FakeEngine, Served, serve_model
from tests.server.http.test_llamacpp import CONTINUE_PROMPT, QWEN_STOPS


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    yield from serve_model()


def client_for(served: Served, key: str = "sk-local") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0, timeout=180)


@pytest.mark.model
def test_openai_client_fim_with_suffix(served: Served) -> None:
    out = client_for(served).completions.create(
        model="qwen2.5-coder-0.5b",
        prompt="def add(a, b):\n    return ",
        suffix="\n\n\nprint(add(1, 2))\n",
        max_tokens=16,
        temperature=0,
    )
    assert out.object == "text_completion"
    assert out.choices[0].text == "a + b"
    assert out.choices[0].finish_reason == "stop"
    assert out.usage is not None and out.usage.completion_tokens > 0


@pytest.mark.model
def test_openai_client_stream(served: Served) -> None:
    stream = client_for(served).completions.create(
        model="qwen2.5-coder-0.5b",
        prompt="def add(a, b):\n    return ",
        suffix="\n",
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == "a + b"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


@pytest.mark.model
def test_openai_client_lists_the_model(served: Served) -> None:
    assert [m.id for m in client_for(served).models.list()] == ["qwen2.5-coder-0.5b"]


@pytest.mark.model
def test_continue_openai_provider_legacy_stream(served: Served) -> None:
    # `args.messages = undefined` and other undefined options vanish in JSON.stringify.
    body = {
        "model": "qwen2.5-coder-1.5b",
        "max_tokens": 24,
        "temperature": 0.01,
        "stream": True,
        "stop": QWEN_STOPS[:4],
        "prompt": CONTINUE_PROMPT,
    }
    with served.client() as client, client.stream("POST", "/v1/completions", json=body) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == "w, h"


def test_openai_client_with_api_key(serve) -> None:
    served = serve(FakeEngine(reply="ok"), settings=HttpSettings(api_key="k3y"))
    assert client_for(served, "k3y").completions.create(model="m", prompt="x").choices[0].text == "ok"
    with pytest.raises(openai.AuthenticationError):
        client_for(served, "wrong").completions.create(model="m", prompt="x")


def test_openai_client_sees_429_as_rate_limit(serve) -> None:
    served = serve(FakeEngine(), settings=HttpSettings(max_queue=1))
    ctx = served.live.server.config.app.state.fimble
    assert ctx.runner.gate.try_enter()  # the queue is full
    with pytest.raises(openai.RateLimitError):
        client_for(served).completions.create(model="m", prompt="x")
    ctx.runner.gate.leave()
