"""Several prompts in one request (issue #22): ``prompt`` lists on ``/v1/completions`` (with ``n``)
and ``/completion``, each prompt answered as if it were asked alone, the list decoded side by side
in one batch job that an editor's request goes before, and the 400s of bad batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fimble.completion.engine import BatchGeneration
from fimble.completion.scheduler import JobKind
from fimble.server.http.body import MAX_PROMPTS
from fimble.server.shared import SharedCompleter
from tests.fakes import hold_worker
from tests.server.http.conftest import FakeEngine, Served, serve_model


def _reply(prompt: str) -> str:
    """A different answer per prompt, so a mixed-up order would show."""
    return " two()" if "second" in prompt else " one()"


def test_openai_list_with_n_has_one_choice_per_prompt_and_copy(serve) -> None:
    served = serve(FakeEngine(reply_for=_reply))
    prompts = ["def first():\n    return", "def second():\n    return"]
    with served.client() as client:
        alone = [
            client.post("/v1/completions", json={"prompt": p, "max_tokens": 8}).json()["choices"][0]["text"]
            for p in prompts
        ]
        seen = len(served.engine.prompts)
        r = client.post("/v1/completions", json={"prompt": prompts, "n": 2, "max_tokens": 8})
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2, 3]  # prompt_i * n + j
    assert [c["text"] for c in choices] == [alone[0], alone[0], alone[1], alone[1]]
    assert alone == [" one()", " two()"]
    # Greedy decoding: each prompt generated once, its answer repeated n times.
    assert len(served.engine.prompts) - seen == 2
    assert r.json()["usage"]["completion_tokens"] == 2 * (len(alone[0]) + len(alone[1]))


def test_llamacpp_array_answers_an_array_like_each_prompt_alone(serve) -> None:
    served = serve(FakeEngine(reply_for=_reply))
    prompts = ["def first():\n    return", "def second():\n    return"]
    with served.client() as client:
        alone = [client.post("/completion", json={"prompt": p, "n_predict": 8}).json() for p in prompts]
        r = client.post("/completion", json={"prompt": prompts, "n_predict": 8})
    assert r.status_code == 200, r.text
    results = r.json()
    assert isinstance(results, list) and len(results) == 2
    assert [x["content"] for x in results] == [a["content"] for a in alone] == [" one()", " two()"]


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/completions", {"prompt": ["x"] * (MAX_PROMPTS + 1)}, "at most"),
        ("/v1/completions", {"prompt": ["x", "y"], "n": MAX_PROMPTS // 2 + 1}, "at most"),
        ("/v1/completions", {"prompt": ["x", 3]}, "prompt[1] must be a string"),
        ("/v1/completions", {"prompt": ["x", "y"], "stream": True}, "streaming takes one prompt"),
        ("/v1/completions", {"prompt": []}, "non-empty list"),
        ("/completion", {"prompt": ["x"] * (MAX_PROMPTS + 1)}, "at most"),
        ("/completion", {"prompt": ["x", {"a": 1}]}, "prompt[1] must be a string"),
        ("/completion", {"prompt": ["x", "y"], "stream": True}, "cannot stream"),
    ],
)
def test_bad_batches_are_400_and_generate_nothing(
    serve, path: str, body: dict[str, Any], message: str
) -> None:
    served = serve(FakeEngine())
    with served.client() as client:
        r = client.post(path, json=body)
    assert r.status_code == 400, r.text
    assert message in r.text
    assert served.engine.prompts == []


def test_a_list_is_one_batch_job_and_a_single_prompt_a_request(serve, monkeypatch) -> None:
    served = serve(FakeEngine())
    kinds: list[JobKind] = []
    submit = served.completer.worker.submit

    def recording(fn: Any, key: Any = None, kind: JobKind = JobKind.REQUEST) -> Any:
        kinds.append(kind)
        return submit(fn, key, kind)

    monkeypatch.setattr(served.completer.worker, "submit", recording)
    with served.client() as client:
        assert client.post("/v1/completions", json={"prompt": "a", "n": 2}).status_code == 200
        assert client.post("/v1/completions", json={"prompt": ["a", "b"]}).status_code == 200
        assert client.post("/completion", json={"prompt": ["a", "b"]}).status_code == 200
    assert kinds == [JobKind.REQUEST, JobKind.BATCH, JobKind.BATCH]


@pytest.fixture(scope="module")
def served_model() -> Iterator[Served]:
    yield from serve_model()


def _spy_batches(served: Served, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[BatchGeneration]]:
    """Record the width of every ``generate_batch`` call of the real engine and its generations."""
    widths: list[int] = []
    gens: list[BatchGeneration] = []
    real = served.engine.generate_batch

    def spy(prompts: Any, **kw: Any) -> list[BatchGeneration]:
        widths.append(len(prompts))
        out = real(prompts, **kw)
        gens.extend(out)
        return out

    monkeypatch.setattr(served.engine, "generate_batch", spy)
    return widths, gens


FUNCTIONS = [
    "<|fim_prefix|>def add(a, b):\n    return<|fim_suffix|>\n<|fim_middle|>",
    "<|fim_prefix|>def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return"
    "<|fim_suffix|>\n<|fim_middle|>",
    "<|fim_prefix|>import os\n\n\ndef home():\n    return os.<|fim_suffix|>\n<|fim_middle|>",
]


@pytest.mark.model
def test_a_real_list_is_decoded_side_by_side_as_each_prompt_alone(
    served_model: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    widths, gens = _spy_batches(served_model, monkeypatch)
    with served_model.client() as client:
        alone = [
            client.post("/v1/completions", json={"prompt": p, "max_tokens": 16}).json()["choices"][0]["text"]
            for p in FUNCTIONS
        ]
        r = client.post("/v1/completions", json={"prompt": FUNCTIONS, "max_tokens": 16})
    assert r.status_code == 200, r.text
    assert widths == [3]  # one batch of all three
    texts = [c["text"] for c in r.json()["choices"]]
    assert all(t.strip() for t in texts), texts
    for got, want, gen in zip(texts, alone, gens, strict=True):
        assert got == want or gen.near_ties, (got, want)  # greedy: the same, near-ties aside


@pytest.mark.model
def test_a_request_during_a_real_list_goes_first_and_the_list_still_ends(
    served_model: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    widths, _ = _spy_batches(served_model, monkeypatch)
    started = threading.Event()
    real = served_model.engine.generate_batch

    def announced(prompts: Any, **kw: Any) -> list[BatchGeneration]:
        started.set()
        return real(prompts, **kw)

    monkeypatch.setattr(served_model.engine, "generate_batch", announced)
    prompts = [FUNCTIONS[0].replace("(a, b)", f"(a, b, c{i})") for i in range(6)]
    body = {"prompt": prompts, "max_tokens": 48, "stop": ["\n\n\n"]}
    with ThreadPoolExecutor(1) as pool, served_model.client() as client, served_model.client() as other:
        listed = pool.submit(client.post, "/v1/completions", json=body)
        assert started.wait(120)
        single = other.post("/v1/completions", json={"prompt": FUNCTIONS[2], "max_tokens": 8})
        response = listed.result(300)
    assert single.status_code == 200 and single.json()["choices"][0]["text"].strip()
    assert response.status_code == 200, response.text
    assert len(response.json()["choices"]) == 6
    assert len(widths) >= 2 and widths[0] == 6  # stopped for the request, then run again


@pytest.mark.model
def test_real_clients_asking_at_once_share_decode_steps_and_get_what_each_gets_alone(
    served_model: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three independent ``/v1/completions`` clients, queued behind one job, decode in one batch
    (``side_by_side``): each answer as when asked alone, near-ties aside."""
    with served_model.client() as client:
        alone = [
            client.post("/v1/completions", json={"prompt": p, "max_tokens": 16}).json()["choices"][0]["text"]
            for p in FUNCTIONS
        ]
        # Elsewhere, so that none of the three continues what the interactive slot holds (that one
        # would run alone first, where its KV cache is: see the next test).
        client.post("/v1/completions", json={"prompt": "<|fim_prefix|>x = [<|fim_suffix|>]<|fim_middle|>"})
    completer = served_model.completer
    shared = (completer.current if isinstance(completer, SharedCompleter) else completer).side_by_side
    gens: list[BatchGeneration] = []
    real = served_model.engine.generate_batch

    def spy(prompts: Any, **kw: Any) -> list[BatchGeneration]:
        done = kw["on_done"]
        kw["on_done"] = lambda i, gen: (gens.append(gen), done(i, gen))
        return real(prompts, **kw)

    monkeypatch.setattr(served_model.engine, "generate_batch", spy)
    groups = shared.groups
    release = hold_worker(completer.worker)
    with ThreadPoolExecutor(3) as pool:
        clients = [served_model.client() for _ in FUNCTIONS]
        asked = [
            pool.submit(c.post, "/v1/completions", json={"prompt": p, "max_tokens": 16})
            for c, p in zip(clients, FUNCTIONS, strict=True)
        ]
        for _ in range(300):  # until all three wait in the queued group
            if shared.in_flight == 3:
                break
            time.sleep(0.05)
        release.set()
        responses = [a.result(300) for a in asked]
        for c in clients:
            c.close()
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    assert shared.groups == groups + 1 and len(gens) == 3
    with served_model.client() as client:
        assert f"fimble_side_by_side_generations_total {shared.generations}" in client.get("/metrics").text
    texts = [r.json()["choices"][0]["text"] for r in responses]
    near_ties = any(g.near_ties for g in gens)
    assert texts == alone or near_ties, (texts, alone)


@pytest.mark.model
def test_a_client_typing_on_beside_another_keeps_its_kv_cache(served_model: Served) -> None:
    """Two overlapping requests, one continuing the prompt the interactive slot holds (a keystroke
    of the client typed before) and one elsewhere: the first is read from the cache, not again."""
    typed = FUNCTIONS[1]
    body = {"n_predict": 4, "cache_prompt": True}
    completer = served_model.completer
    with served_model.client() as client:
        first = client.post("/completion", json={**body, "prompt": typed}).json()
        assert first["timings"]["prompt_n"] > 20
        release = hold_worker(completer.worker)
        on = typed.replace("return<|fim_suffix|>", "return a<|fim_suffix|>")
        with ThreadPoolExecutor(2) as pool, served_model.client() as other:
            typing = pool.submit(client.post, "/completion", json={**body, "prompt": on})
            elsewhere = pool.submit(other.post, "/completion", json={**body, "prompt": FUNCTIONS[2]})
            time.sleep(1.0)
            release.set()
            answers = [typing.result(300).json(), elsewhere.result(300).json()]
    assert answers[0]["timings"]["prompt_n"] < first["timings"]["prompt_n"] // 2, answers[0]["timings"]
    assert all(a["content"] is not None for a in answers)
