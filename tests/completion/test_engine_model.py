"""The engine on a real model: FIM tokens, KV reuse counts, stops, cancellation, known completions."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fimble.completion.context.imports import IMPORT_CHOICES, ImportChoices
from fimble.completion.engine import Engine, EngineConfig
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.guide import ImportGuide
from fimble.completion.prompt.fim import build_prompt
from fimble.completion.service import CompletionRequest, complete
from tests.model_paths import DEFAULT, SMALL, model_path

pytestmark = pytest.mark.model

EXAMPLE = Path(__file__).parents[2] / "fimble" / "examples" / "dates.py"


@pytest.fixture(scope="module")
def small() -> Iterator[Engine]:
    engine = Engine(model_path(SMALL), EngineConfig(n_ctx=4096))
    yield engine
    engine.close()


def fim_prompt(engine: Engine, prefix: str, suffix: str) -> list[int]:
    return build_prompt(engine.tokenize, engine.fim, prefix, suffix).tokens


def test_qwen_fim_tokens_are_read_from_the_vocabulary(small: Engine) -> None:
    fim = small.fim
    assert fim.family == "qwen"
    assert (fim.prefix, fim.suffix, fim.middle) == (151659, 151661, 151660)
    assert fim.repo_level
    assert 151643 in fim.stop  # <|endoftext|>


def test_control_token_text_in_a_file_is_plain_text(small: Engine) -> None:
    tokens = small.tokenize("x = '<|endoftext|><|fim_middle|>'")
    assert 151643 not in tokens and small.fim.middle not in tokens
    assert small.detokenize(tokens) == "x = '<|endoftext|><|fim_middle|>'"


def test_prefix_reuse_counts_evaluated_tokens(small: Engine) -> None:
    small.reset()
    prompt = fim_prompt(small, "def add(a, b):\n    return a", "\n")
    first = small.generate(prompt, max_tokens=4)
    assert first.tokens_reused == 0 and first.tokens_evaluated == len(prompt)
    again = small.generate(prompt, max_tokens=4)
    assert again.tokens_evaluated == 1 and again.tokens_reused == len(prompt) - 1
    assert again.text == first.text  # greedy and reused KV give the same answer


def test_keystroke_reevaluates_only_the_tail(small: Engine) -> None:
    small.reset()
    prefix = "".join(f"value_{i} = {i}\n" for i in range(60)) + "total = value_1 + val"
    p1 = fim_prompt(small, prefix, "\nprint(total)\n")
    small.generate(p1, max_tokens=2)
    p2 = fim_prompt(small, prefix + "u", "\nprint(total)\n")
    second = small.generate(p2, max_tokens=2)
    assert second.tokens_reused > len(p2) - 20
    assert second.tokens_evaluated < 20


def test_moved_context_chunk_is_reused_not_reevaluated(small: Engine) -> None:
    small.reset()
    chunk_a = ("a.py", "".join(f"def alpha_{i}(x):\n    return x + {i}\n" for i in range(20)), "test")
    chunk_b = ("b.py", "".join(f"def beta_{i}(y):\n    return y * {i}\n" for i in range(20)), "test")
    chunk_c = ("c.py", "def gamma():\n    pass\n", "test")

    def prompt(files: list[tuple[str, str, str]]) -> tuple[list[int], int]:
        p = build_prompt(
            small.tokenize, small.fim, "x = alpha_3(1) + beta_", "\n", path="main.py", files=files
        )
        return p.tokens, p.stable_len

    tokens, limit = prompt([chunk_c, chunk_a, chunk_b])
    small.generate(tokens, max_tokens=1, reuse_limit=limit)
    tokens2, limit2 = prompt([chunk_a, chunk_b])  # the first chunk dropped: a and b move left
    gen = small.generate(tokens2, max_tokens=1, reuse_limit=limit2)
    assert gen.tokens_evaluated < 30, gen


def test_single_line_stops_at_newline(small: Engine) -> None:
    text = "def greet(name):\n    message = "
    result = complete(
        small, CompletionRequest(text=text + "\n", offset=len(text), multiline=False, max_tokens=32)
    )
    assert "\n" not in result.text
    assert result.stop_reason in ("newline", "eog", "max_tokens")


IMPORTING = "from pkg.cache import \n\n\nstore = Store()\nbucket = Bucket(store)\nbucket.fill(store)\n"


def test_a_guide_keeps_the_import_line_to_its_choices(small: Engine) -> None:
    """Whatever the model would have named, the guided line names what the module can give."""
    typed = "from pkg.cache import "
    forced = ImportGuide(ImportChoices({"pkg.cache": ("Store",)}), typed, margin=float("inf"))
    gen = small.generate(fim_prompt(small, typed, IMPORTING[len(typed) :]), max_tokens=12, guide=forced)
    assert gen.text.split("\n")[0].rstrip() == "Store"
    assert gen.guide == "kept"
    request = CompletionRequest(
        text=IMPORTING,
        offset=len(typed),
        max_tokens=12,
        context_files=(ImportChoices({"pkg.cache": ("Bucket", "Store")}).as_snippet("app.py"),),
    )
    result = complete(small, request)  # the service: choices guide the line and are not in the prompt
    assert f"{typed}{result.text}".split(", ")[0] in (f"{typed}Bucket", f"{typed}Store"), result.text
    assert result.generation.guide in ("kept", "released")
    assert all(p.reason != IMPORT_CHOICES for p in result.parts)


def test_max_tokens_stop(small: Engine) -> None:
    text = "# a long list of numbers\nnumbers = ["
    result = complete(small, CompletionRequest(text=text, offset=len(text), multiline=True, max_tokens=3))
    assert result.stop_reason == "max_tokens"
    assert len(result.generation.tokens) == 3


def test_cancel_between_tokens(small: Engine) -> None:
    cancel = CancelToken()
    seen: list[str] = []

    def on_text(text: str) -> None:
        seen.append(text)
        if len(seen) == 2:
            cancel.cancel()

    text = "# count to fifty\nfor i in range(50):\n"
    prompt = fim_prompt(small, text, "")
    gen = small.generate(prompt, max_tokens=50, cancel=cancel, on_text=on_text)
    assert gen.stop_reason == "cancelled"
    assert len(gen.tokens) == 2


def test_cancel_aborts_a_long_prompt_evaluation(small: Engine, caplog: pytest.LogCaptureFixture) -> None:
    small.reset()
    prefix = "".join(f"def function_number_{i}(argument):\n    return argument * {i}\n\n" for i in range(120))
    prompt = build_prompt(small.tokenize, small.fim, prefix, "", prefix_budget=3000).tokens
    assert len(prompt) > 1500
    cancel = CancelToken()
    timer = threading.Timer(0.3, cancel.cancel)
    timer.start()
    gen = small.generate(prompt, max_tokens=8, cancel=cancel)
    timer.cancel()
    assert gen.stop_reason == "cancelled"
    # An abort asked for is routine: llama.cpp's "failed to decode" lines are not warnings then.
    assert not [r for r in caplog.records if r.name == "fimble.llama" and r.levelno >= logging.WARNING]
    kept = len(small.cached_tokens)
    assert kept < len(prompt)  # stopped part-way (batches of 512), and the record says how far
    # The engine stays usable, and what had been evaluated before the abort is reused.
    done = small.generate(prompt, max_tokens=2)
    assert done.tokens_reused == kept
    assert done.stop_reason != "cancelled"


def test_a_cancelled_background_request_stops_even_a_short_prompt_evaluation(small: Engine) -> None:
    """A keystroke's short prompt runs to the end when cancelled (its KV is what the next keystroke
    reuses); a prefetch's is stopped, so the request that cancelled it does not wait for it."""
    prompt = fim_prompt(small, "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n")
    assert 8 < len(prompt) < small.config.abort_min_tokens
    small.reset()
    keystroke = CancelToken()
    keystroke.cancel()
    gen = small.generate(prompt, max_tokens=4, cancel=keystroke)
    assert gen.stop_reason == "cancelled" and gen.tokens_evaluated == len(prompt)
    small.reset()
    prefetch = CancelToken(background=True)
    prefetch.cancel()
    gen = small.generate(prompt, max_tokens=4, cancel=prefetch)
    assert gen.stop_reason == "cancelled" and gen.tokens_evaluated == 0
    assert len(small.cached_tokens) < len(prompt)
    assert small.generate(prompt, max_tokens=2).stop_reason != "cancelled"  # still usable


@pytest.fixture(scope="module")
def default() -> Iterator[Engine]:
    engine = Engine(model_path(DEFAULT), EngineConfig(n_ctx=4096))
    yield engine
    engine.close()


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            EXAMPLE.read_text().split("dates.append(")[0] + "dates.append(",
            ")\n    return dates\n",
            "dt.date(year, month, day)",
        ),
        ("def add(a, b):\n    return ", "\n\n\nprint(add(1, 2))\n", "a + b"),
        ("numbers = [3, 1, 2]\nnumbers.so", "\nprint(numbers)\n", "rt()"),
        (
            "import os\n\ndef list_py(root):\n    out = []\n"
            "    for name in os.listdir(root):\n        if name.endswith(",
            "):\n            out.append(name)\n    return out\n",
            "'.py'",
        ),
    ],
)
def test_known_fim_answers_with_the_default_model(
    default: Engine, before: str, after: str, expected: str
) -> None:
    result = complete(default, CompletionRequest(text=before + after, offset=len(before), max_tokens=24))
    assert result.text == expected


_LOG_RACE = """
import sys, threading, time
import llama_cpp
from fimble.completion import engine as eng

e = eng.Engine(sys.argv[1], eng.EngineConfig(n_ctx=256))
stop = threading.Event()
sys.setswitchinterval(1e-5)  # many more thread interleavings: the old code crashed in ~2 s, not ~5

def churn():  # another engine's thread inside llama.cpp, logging (as llama_free does on a switch)
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch, params.no_perf = 256, 32, 32, True
    while not stop.is_set():
        llama_cpp.llama_free(llama_cpp.llama_init_from_model(e._model, params))

t = threading.Thread(target=churn)
t.start()
end = time.monotonic() + 5
while time.monotonic() < end:
    eng._install_log_callback(llama_cpp)  # what every new engine does while the old one frees itself
stop.set()
t.join()
e.close()
"""


def test_a_new_engine_does_not_pull_the_log_callback_from_under_another_thread() -> None:
    """Replacing the callback per engine segfaulted here in most runs (return code -11, mostly
    within 2 s): the server died that way during a threads change. Run in a child process, so a
    crash fails this test instead of killing pytest."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", _LOG_RACE, str(model_path(SMALL))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )
    assert run.returncode == 0, run.stderr[-3000:]
