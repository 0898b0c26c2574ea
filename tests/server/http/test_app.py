"""The HTTP app over real sockets with a scripted engine: shapes, errors, limits, auth, cancel."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx

from fimble.completion.engine import Engine
from fimble.errors import ModelNotFound
from fimble.server.http import HttpSettings
from fimble.server.index_runner import IndexRunner, NullIndex
from tests.server.http.conftest import FakeEngine, wait_for

CONTINUE_QWEN_PROMPT = (
    "<|fim_prefix|>// Path: src/util.ts\n// export function add(a: number, b: number) {\n"
    "//   return a + b;\n// }\n"
    "// src/app.ts\nimport { add } from './util';\nconst total = add(<|fim_suffix|>);\n<|fim_middle|>"
)


def test_health_reports_ready_and_model(serve) -> None:
    served = serve()
    with served.client() as client:
        r = client.get("/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert r.json()["model"] == "fake-coder-1.5b"


def test_loading_model_answers_503_with_retry_after(serve) -> None:
    release = threading.Event()

    def load() -> Engine:
        release.wait(10)
        return FakeEngine()  # type: ignore[return-value]

    served = serve(load=load, settings=HttpSettings(retry_after_s=3))
    with served.client() as client:
        health = client.get("/health")
        gen = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
    release.set()
    assert health.status_code == 503 and health.json()["status"] == "loading"
    assert gen.status_code == 503
    assert gen.headers["retry-after"] == "3"
    assert "loading" in gen.json()["error"]["message"]
    assert served.completer.wait_ready(10)
    with served.client() as client:
        assert client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code == 200


def test_model_load_error_is_json_with_the_fix(serve) -> None:
    def load() -> Engine:
        raise ModelNotFound("model x is not downloaded: run `fimble models pull x`")

    served = serve(load=load)
    assert wait_for(lambda: served.completer.worker.ready.is_set())
    with served.client() as client:
        health = client.get("/health")
        gen = client.post("/api/generate", json={"model": "x", "prompt": "a", "suffix": "b", "stream": False})
    assert health.status_code == 503 and "fimble models pull x" in health.json()["error"]
    assert gen.status_code == 503 and "fimble models pull x" in gen.json()["error"]


def test_openai_completion_shape_and_prompt_rebuilt_from_ids(serve) -> None:
    served = serve(FakeEngine(reply="1, 2"))
    with served.client() as client:
        r = client.post(
            "/v1/completions", json={"model": "qwen", "prompt": CONTINUE_QWEN_PROMPT, "max_tokens": 8}
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "text_completion"
    assert body["choices"][0]["text"] == "1, 2"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 4
    # Continue's snippet came back as a repository file; its comment marks and FIM text are gone.
    prompt = served.engine.prompts[-1]
    assert prompt.startswith("<REPO>workspace\n<SEP>src/util.ts\nexport function add(")
    assert "<SEP>src/app.ts\n<PRE>import { add } from './util';\nconst total = add(<SUF>);\n<MID>" in prompt
    assert "// Path" not in prompt and "<|fim_prefix|>" not in prompt


def test_plain_prompt_is_plain_text_and_special_text_stays_text(serve) -> None:
    served = serve(FakeEngine(reply=" world"))
    with served.client() as client:
        r = client.post("/v1/completions", json={"prompt": "hello <|endoftext|>", "max_tokens": 3})
    assert r.json()["choices"][0]["text"] == " wo"
    assert r.json()["choices"][0]["finish_reason"] == "length"
    assert served.engine.prompts[-1] == "hello <|endoftext|>"


def test_openai_stream_is_sse_ending_with_done(serve) -> None:
    served = serve(FakeEngine(reply="abc"))
    with (
        served.client() as client,
        client.stream("POST", "/v1/completions", json={"prompt": "x", "stream": True, "max_tokens": 10}) as r,
    ):
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: ") :]) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == "abc"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_client_stop_strings_are_honoured_and_never_streamed(serve) -> None:
    served = serve(FakeEngine(reply="foo<END>bar"))
    with (
        served.client() as client,
        client.stream(
            "POST", "/completion", json={"prompt": "x", "stream": True, "stop": ["<END>"], "n_predict": 20}
        ) as r,
    ):
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert "".join(e["content"] for e in events) == "foo"
    assert events[-1]["stop"] is True and events[-1]["stop_type"] == "word"


def test_bad_input_is_4xx_with_a_message(serve) -> None:
    served = serve(settings=HttpSettings(max_body_bytes=1000))
    with served.client() as client:
        not_json = client.post(
            "/v1/completions", content=b"{nope", headers={"content-type": "application/json"}
        )
        empty = client.post("/infill", content=b"")
        wrong = client.post("/v1/completions", json={"prompt": "x", "max_tokens": "many"})
        negative = client.post("/v1/completions", json={"prompt": "x", "max_tokens": -3})
        tokens = client.post("/v1/completions", json={"prompt": [1, 2, 3]})
        array = client.post("/api/generate", json=[1, 2])
        options = client.post("/api/generate", json={"prompt": "a", "options": {"num_predict": "x"}})
        big = client.post("/v1/completions", json={"prompt": "x" * 2000})
        missing = client.get("/nope")
        method = client.get("/v1/completions")
    assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["error"]["message"]
    assert empty.status_code == 400 and "empty" in empty.json()["error"]["message"]
    assert wrong.status_code == 422 and "max_tokens" in wrong.json()["error"]["message"]
    assert negative.status_code == 422
    # A prompt list is a batch; a non-string item is a bad batch (400, as OpenAI answers it).
    assert tokens.status_code == 400 and "token ids" in tokens.json()["error"]["message"]
    assert array.status_code == 422 and isinstance(array.json()["error"], str)  # Ollama's error shape
    assert options.status_code == 422 and "num_predict" in options.json()["error"]
    assert big.status_code == 413
    assert missing.status_code == 404 and "error" in missing.json()
    assert method.status_code == 405


def test_burst_beyond_the_queue_gets_429_with_retry_after(serve) -> None:
    served = serve(
        FakeEngine(reply="x" * 40, delay=0.01), settings=HttpSettings(max_queue=2, retry_after_s=1)
    )
    results: list[httpx.Response] = []
    lock = threading.Lock()

    def one() -> None:
        with served.client() as client:
            r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 40})
        with lock:
            results.append(r)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    codes = sorted(r.status_code for r in results)
    assert len(codes) == 8 and set(codes) == {200, 429}, codes
    refused = next(r for r in results if r.status_code == 429)
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["type"] == "rate_limit_exceeded"
    with served.client() as client:  # the queue drained: admitted again
        assert client.post("/v1/completions", json={"prompt": "x", "max_tokens": 1}).status_code == 200
        assert "fimble_http_rejected_total" in client.get("/metrics").text


def test_disconnect_mid_stream_cancels_the_generation(serve) -> None:
    engine = FakeEngine(reply="y" * 2000, delay=0.01)
    served = serve(engine)
    with (
        served.client() as client,
        client.stream(
            "POST", "/v1/completions", json={"prompt": "x", "stream": True, "max_tokens": 2000}
        ) as r,
    ):
        next(r.iter_lines())  # the first chunk arrived; now the client goes away
    assert wait_for(lambda: engine.cancelled == 1)
    ctx = served.live.server.config.app.state.fimble
    assert wait_for(lambda: ctx.runner.gate.active == 0)


def test_disconnect_while_waiting_cancels_a_non_streaming_request(serve) -> None:
    engine = FakeEngine(reply="z" * 2000, delay=0.01)
    served = serve(engine)
    body = json.dumps({"prompt": "x", "max_tokens": 2000, "stream": False}).encode()
    with socket.create_connection(("127.0.0.1", served.live.port)) as sock:
        sock.sendall(
            b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert engine.started.wait(5)
        time.sleep(0.05)
    assert wait_for(lambda: engine.cancelled == 1)
    assert served.completer.stats().cancelled == 1


def test_api_key_is_required_when_set(serve) -> None:
    served = serve(settings=HttpSettings(api_key="s3cret"))
    body = {"prompt": "x", "max_tokens": 1}
    with served.client() as client:
        none = client.post("/v1/completions", json=body)
        wrong = client.post("/v1/completions", json=body, headers={"Authorization": "Bearer nope"})
        ok = client.post("/v1/completions", json=body, headers={"Authorization": "Bearer s3cret"})
        x_api_key = client.post("/infill", json={"n_predict": 1}, headers={"X-Api-Key": "s3cret"})
        ollama = client.get("/api/tags")
        health = client.get("/health")
        schema = client.get("/openapi.json")
    assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401
    assert ok.status_code == 200
    assert x_api_key.status_code == 200
    assert ollama.status_code == 401 and isinstance(ollama.json()["error"], str)
    assert health.status_code == 200 and schema.status_code == 200
    assert schema.json()["paths"]["/v1/completions"]["post"]["security"] == [{"bearer": []}]


def test_no_auth_and_no_cors_by_default(serve) -> None:
    served = serve()
    with served.client() as client:
        r = client.get("/v1/models", headers={"Origin": "http://evil.example"})
    assert r.status_code == 200
    assert "access-control-allow-origin" not in r.headers
    assert r.json()["data"][0]["id"] == "fake-coder-1.5b"


def test_cors_when_configured(serve) -> None:
    served = serve(settings=HttpSettings(cors_origins=("http://localhost:3000",)))
    with served.client() as client:
        pre = client.options(
            "/v1/completions",
            headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"},
        )
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_ollama_show_template_makes_continue_use_fim(serve) -> None:
    served = serve()
    with served.client() as client:
        tags = client.get("/api/tags").json()
        show = client.post("/api/show", json={"name": "fake-coder:1.5b"}).json()
    assert tags["models"][0]["name"] == "fake-coder:1.5b"
    assert ".Suffix" in show["template"] and "<|fim_middle|>" in show["template"]
    for line in show["parameters"].split("\n"):  # Continue parses each line as `key value`
        assert len(line.split()) == 2


def test_metrics_are_prometheus_text(serve) -> None:
    served = serve()
    with served.client() as client:
        client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
        text = client.get("/metrics").text
    for name in (
        "fimble_http_requests_total{",
        "fimble_http_request_duration_seconds_bucket{",
        "fimble_tokens_evaluated_total ",
        "fimble_tokens_reused_total ",
        "fimble_kv_cache_hits_total ",
        "fimble_queue_depth 0",
        "fimble_model_ready 1",
    ):
        assert name in text, name
    assert 'route="/v1/completions",method="POST",status="200"' in text


def test_openapi_lists_every_endpoint(serve) -> None:
    served = serve()
    with served.client() as client:
        doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    for path in (
        "/v1/completions",
        "/v1/models",
        "/completion",
        "/infill",
        "/api/tags",
        "/api/show",
        "/api/generate",
        "/health",
        "/metrics",
    ):
        assert path in doc["paths"], path


class SnippetIndex(NullIndex):
    """A workspace index that knows one definition (or fails, or is slow)."""

    def __init__(self, fail: bool = False, delay: float = 0.0) -> None:
        self.fail, self.delay, self.asked = fail, delay, []

    def context_for(self, path, prefix, suffix):  # type: ignore[no-untyped-def]
        self.asked.append(path)
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("index broke")
        return [("src/math.ts", "export const PI = 3.14;\n", "definition of PI")]


def test_repository_context_from_the_index_joins_the_clients_snippets(serve) -> None:
    index = SnippetIndex()
    served = serve(index=IndexRunner(index))
    with served.client() as client:
        assert (
            client.post("/v1/completions", json={"prompt": CONTINUE_QWEN_PROMPT, "max_tokens": 4}).status_code
            == 200
        )
    prompt = served.engine.prompts[-1]
    assert index.asked == ["src/app.ts"]
    # The client's snippets come first in the list (kept when the budget is short), so they are
    # laid out last, nearest the current file; fimble's own before them.
    assert (
        prompt.index("<SEP>src/math.ts\nexport const PI")
        < prompt.index("<SEP>src/util.ts")
        < prompt.index("<PRE>")
    )


def test_failing_or_slow_index_costs_only_the_context(serve) -> None:
    for index in (SnippetIndex(fail=True), SnippetIndex(delay=1.0)):
        served = serve(index=IndexRunner(index), settings=HttpSettings(context_timeout_s=0.1))
        with served.client() as client:
            r = client.post("/infill", json={"input_prefix": "x = ", "input_suffix": "\n", "n_predict": 2})
        assert r.status_code == 200 and "src/math.ts" not in served.engine.prompts[-1]


def test_a_completion_request_stops_batch_work_as_it_arrives_not_at_its_submission(serve) -> None:
    """While the request's repository context is gathered, a running batch job is stopped already
    (on two cores its decoding would take the CPU the request needs) and it resumes afterwards."""
    from fimble.completion.scheduler import JobKind

    batch_runs: list[str] = []
    started = threading.Event()
    decoding = threading.Event()  # the batch job is in its loop right now

    def batch(_engine: object, cancel: object) -> str:
        batch_runs.append("run")
        decoding.set()
        started.set()
        try:
            for _ in range(300):
                if cancel.cancelled:  # type: ignore[attr-defined]
                    return "stopped"
                time.sleep(0.01)
            return f"done after {len(batch_runs)} runs"
        finally:
            decoding.clear()

    class Watching(SnippetIndex):
        def context_for(self, path, prefix, suffix):  # type: ignore[no-untyped-def]
            # Paused, or already stopped and put back in the queue (which clears the pause: on a
            # loaded machine the batch sees it and is requeued before this thread runs).
            self.batch_paused = job.cancel.cancelled or not decoding.is_set()
            return super().context_for(path, prefix, suffix)

    index = Watching()
    served = serve(index=IndexRunner(index))
    job = served.completer.worker.submit(batch, kind=JobKind.BATCH)
    assert started.wait(5)
    with served.client() as client:
        r = client.post("/infill", json={"input_prefix": "x = ", "input_suffix": "\n", "n_predict": 2})
        assert r.status_code == 200
        assert index.batch_paused  # stopped before the request reached the engine
        assert client.get("/health").status_code == 200  # does not complete: stops nothing
    # Resumed once, after the completion; stopped by /health it would have run 3 times.
    assert job.future.result(10) == "done after 2 runs"
