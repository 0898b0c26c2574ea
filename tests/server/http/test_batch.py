"""Several prompts in one request (issue #22): ``prompt`` lists on ``/v1/completions`` (with ``n``)
and ``/completion``, each prompt answered as if it were asked alone, and the 400s of bad batches."""

from __future__ import annotations

from typing import Any

import pytest

from fimble.completion.scheduler import JobKind
from fimble.server.http.body import MAX_PROMPTS
from tests.server.http.conftest import FakeEngine


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


def test_list_items_run_as_batch_jobs_and_a_single_prompt_as_a_request(serve, monkeypatch) -> None:
    served = serve(FakeEngine())
    kinds: list[JobKind] = []
    submit = served.completer.submit_tokens

    def recording(*args: Any, **kwargs: Any) -> Any:
        kinds.append(kwargs.get("kind", JobKind.REQUEST))
        return submit(*args, **kwargs)

    monkeypatch.setattr(served.completer, "submit_tokens", recording)
    with served.client() as client:
        assert client.post("/v1/completions", json={"prompt": "a", "n": 2}).status_code == 200
        assert client.post("/v1/completions", json={"prompt": ["a", "b"]}).status_code == 200
        assert client.post("/completion", json={"prompt": ["a", "b"]}).status_code == 200
    assert kinds == [JobKind.REQUEST, *[JobKind.BATCH] * 4]
