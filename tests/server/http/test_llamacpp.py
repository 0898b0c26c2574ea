"""llama.cpp endpoints on the real small model, replaying what Continue's llama.cpp provider and
llama.vim send (core/llm/llms/LlamaCpp.ts; llama.vim autoload/llama.vim)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.server.http.conftest import Served, serve_model, wait_for

pytestmark = pytest.mark.model

QWEN_STOPS = [
    "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<|im_start|>", "<|im_end|>",
    "\n\n", "\r\n\r\n", "/src/", "#- coding: utf-8", "```", "\ndef", "\nclass",
]  # fmt: skip

# Continue: qwenCoderFimTemplate around formatSnippets(...) + "\n" + prefix; suffix after the cursor.
CONTINUE_PROMPT = (
    "<|fim_prefix|># Path: shapes/geometry.py\n"
    "# def rectangle_area(width, height):\n"
    "#     return width * height\n"
    "# shapes/report.py\n"
    "from shapes.geometry import rectangle_area\n\n\n"
    "def total_area(rects):\n"
    "    return sum(rectangle_area(<|fim_suffix|>) for w, h in rects)\n"
    "<|fim_middle|>"
)

# LlamaCpp._streamComplete: {prompt, stream: true, ...convertArgs} with undefined options dropped.
CONTINUE_BODY = {
    "prompt": CONTINUE_PROMPT,
    "stream": True,
    "n_predict": 24,
    "stop": QWEN_STOPS,
    "temperature": 0.01,
}

LLAMA_VIM_FIELDS = [
    "content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms",
    "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms",
    "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated", "tokens_cached",
]  # fmt: skip

RING_CHUNK = {
    "text": "def rectangle_area(width, height):\n    return width * height\n",
    "time": [1733, 123456],
    "filename": "shapes/geometry.py",
}


def llama_vim_fim(prefix_lines: str, middle: str, suffix: str) -> dict[str, object]:
    """The body of llama#fim(): the cursor's line prefix goes in `prompt`."""
    return {
        "input_prefix": prefix_lines,
        "input_suffix": suffix,
        "input_extra": [RING_CHUNK],
        "prompt": middle,
        "n_predict": 128,
        "n_indent": 4,
        "top_k": 40,
        "top_p": 0.99,
        "stream": False,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": True,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 1500,
        "response_fields": LLAMA_VIM_FIELDS,
    }


# The body of s:ring_update(): warm the cache with the extra context, generate nothing.
RING_UPDATE = {
    "input_prefix": "",
    "input_suffix": "",
    "input_extra": [RING_CHUNK],
    "prompt": "",
    "n_predict": 0,
    "temperature": 0.0,
    "stream": False,
    "samplers": [],
    "cache_prompt": True,
    "t_max_prompt_ms": 1,
    "t_max_predict_ms": 1,
    "response_fields": [""],
}


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    yield from serve_model()


def sse_events(lines: Iterator[str]) -> list[dict[str, object]]:
    return [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]


def test_continue_llamacpp_stream(served: Served) -> None:
    with served.client() as client, client.stream("POST", "/completion", json=CONTINUE_BODY) as r:
        assert r.status_code == 200
        events = sse_events(r.iter_lines())
    text = "".join(str(e["content"]) for e in events)
    assert events[-1]["stop"] is True
    assert all(e["stop"] is False for e in events[:-1])
    # Completed inside the call; the ")..." that already follows the cursor is not repeated.
    assert text == "w, h", text


def test_completion_non_streaming_plain_text(served: Served) -> None:
    body = {"prompt": "# Python\nimport os\n\nprint(os.", "n_predict": 4, "stream": False}
    with served.client() as client:
        r = client.post("/completion", json=body)
    out = r.json()
    assert r.status_code == 200 and out["stop"] is True
    assert out["tokens_predicted"] <= 4 and out["content"]
    assert out["timings"]["predicted_n"] == out["tokens_predicted"]


def test_llama_vim_ring_update_then_fim_reuses_the_cache(served: Served) -> None:
    prefix = "from shapes.geometry import rectangle_area\n\n\ndef square_area(side):\n"
    with served.client() as client:
        warm = client.post("/infill", json=RING_UPDATE)
        assert warm.status_code == 200 and warm.json() == {}
        first = client.post("/infill", json=llama_vim_fim(prefix, "    return ", "\n")).json()
        again = client.post("/infill", json=llama_vim_fim(prefix, "    return rect", "\n")).json()
    assert set(first) == set(LLAMA_VIM_FIELDS)
    assert first["content"] in ("side * side", "side ** 2", "rectangle_area(side, side)"), first
    assert again["content"].startswith("angle_area(side"), again
    # The ring chunk was evaluated by the warm-up, the file head by the first request: each later
    # request evaluates only what changed.
    assert first["timings/prompt_n"] < first["tokens_cached"] - 20
    assert again["timings/prompt_n"] < 10


def test_disconnect_mid_stream_stops_generation(served: Served) -> None:
    before = served.completer.stats().cancelled
    body = {"prompt": "def fibonacci(n):\n", "n_predict": 400, "stream": True}
    with served.client() as client, client.stream("POST", "/completion", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                break  # the first token arrived; the client goes away
    assert wait_for(lambda: served.completer.stats().cancelled == before + 1, timeout=30)
    assert served.completer.last["stop_reason"] == "cancelled"
    assert served.completer.last["tokens_generated"] < 400
