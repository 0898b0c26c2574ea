"""Ollama endpoints on the real small model, replaying Continue's ``ollama`` provider
(core/llm/llms/Ollama.ts: the /api/show probe, then _streamFim's /api/generate with prompt + suffix)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.server.http.conftest import Served, serve_model

pytestmark = pytest.mark.model

# With a FIM-capable model Continue sends its snippet block + prefix as `prompt`, the rest as `suffix`.
CONTINUE_PREFIX = (
    "# Path: shapes/geometry.py\n"
    "# def rectangle_area(width, height):\n"
    "#     return width * height\n"
    "# shapes/report.py\n"
    "from shapes.geometry import rectangle_area\n\n\n"
    "def square_area(side):\n"
    "    return "
)


def continue_fim_body(stream: bool | None) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "qwen2.5-coder:0.5b",
        "prompt": CONTINUE_PREFIX,
        "suffix": "\n",
        "options": {"temperature": 0.01, "num_predict": 24, "stop": ["\n\n", "```"], "num_ctx": 4096},
        "keep_alive": 1800,
    }
    if stream is not None:  # Continue leaves `stream` undefined: Ollama then streams
        body["stream"] = stream
    return body


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    yield from serve_model()


def test_continue_probe_sees_a_fim_template(served: Served) -> None:
    with served.client() as client:
        show = client.post("/api/show", json={"name": "qwen2.5-coder:0.5b"})
        tags = client.get("/api/tags")
    body = show.json()
    assert show.status_code == 200 and ".Suffix" in body["template"]
    # Continue: `line.match(/^(\S+)\s+((?:".*")|\S+)$/)` must match every parameters line.
    assert all(re.match(r'^(\S+)\s+((?:".*")|\S+)$', line) for line in body["parameters"].split("\n"))
    model = tags.json()["models"][0]
    assert model["name"] == "qwen2.5-coder:0.5b" and model["size"] > 100_000_000
    assert model["details"]["family"] == "qwen"


def test_continue_fim_stream_is_ndjson(served: Served) -> None:
    with served.client() as client, client.stream("POST", "/api/generate", json=continue_fim_body(None)) as r:
        assert r.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
    assert all(not line["done"] for line in lines[:-1]) and lines[-1]["done"] is True
    text = "".join(line["response"] for line in lines)
    assert text in ("side * side", "side ** 2", "rectangle_area(side, side)"), text
    assert lines[-1]["eval_count"] > 0 and lines[-1]["done_reason"] == "stop"


def test_generate_non_streaming(served: Served) -> None:
    with served.client() as client:
        r = client.post("/api/generate", json=continue_fim_body(False))
    out = r.json()
    assert r.status_code == 200 and out["done"] is True
    assert out["response"] in ("side * side", "side ** 2", "rectangle_area(side, side)")


def test_empty_generate_loads_the_model(served: Served) -> None:
    with served.client() as client:
        out = client.post("/api/generate", json={"model": "qwen2.5-coder:0.5b"}).json()
    assert out["done"] is True and out["done_reason"] == "load" and out["response"] == ""
