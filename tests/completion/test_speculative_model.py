"""Speculative decoding on a real model: same output as plain greedy decoding, stops and cancels
token by token inside an accepted draft, and a KV cache that says what it holds after rejections."""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from fimble.completion.engine import Engine, EngineConfig, Generation
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.speculative import DraftPolicy
from fimble.completion.prompt.fim import build_prompt
from tests.model_paths import DEFAULT, SMALL, model_path

pytestmark = pytest.mark.model

EXAMPLE = Path(__file__).parents[2] / "fimble" / "examples" / "dates.py"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
NEAR_TIE = 1.0  # logits

# A completion that copies from the prompt: drafts are long and mostly accepted.
COPY_PREFIX = (
    "".join(
        f"    parser.add_argument('--level-{i}', type=int, default={i}, help='level {i} of the search')\n"
        for i in range(8)
    )
    + "    parser.add_argument('--level-8', type=int, default=8, help='"
)
COPY_SUFFIX = "\n    return parser\n"


@pytest.fixture(scope="module")
def small() -> Iterator[Engine]:
    engine = Engine(model_path(SMALL), EngineConfig(n_ctx=4096))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def default() -> Iterator[Engine]:
    engine = Engine(model_path(DEFAULT), EngineConfig(n_ctx=4096))
    yield engine
    engine.close()


def fim(engine: Engine, prefix: str, suffix: str) -> list[int]:
    return build_prompt(engine.tokenize, engine.fim, prefix, suffix, prefix_budget=400).tokens


def fresh(engine: Engine, prompt: list[int], speculative: bool, **kwargs: object) -> Generation:
    """Both modes start from an empty cache (and a new draft policy), so only the decoding differs."""
    engine.reset()
    engine.draft_policy = DraftPolicy()
    return engine.generate(prompt, speculative=speculative, **kwargs)  # type: ignore[arg-type]


def plain_margin(engine: Engine, prompt: list[int], n: int) -> float:
    """How far plain decoding's choice of output token ``n`` leads the runner-up, in logits."""
    fresh(engine, prompt, False, max_tokens=n)
    logits = engine._np.ctypeslib.as_array(
        engine._ll.llama_get_logits_ith(engine._ctx, -1), shape=(engine.n_vocab,)
    )
    top2 = engine._np.sort(logits)[-2:]
    return float(top2[1] - top2[0])


def assert_same_unless_near_tie(
    engine: Engine, prompt: list[int], plain: Generation, spec: Generation
) -> None:
    """Speculative output must equal plain greedy output, up to a choice plain decoding itself makes
    by a rounding-level margin: a batch is computed with other kernels than a single token, so the
    KV of accepted draft tokens differs from plain decoding's in the last bits (as the KV of a
    prompt evaluated in other batches does), and a near-tie can tip either way."""
    if (spec.tokens, spec.text, spec.stop_reason) == (plain.tokens, plain.text, plain.stop_reason):
        return
    n = next(
        (i for i, (a, b) in enumerate(zip(plain.tokens, spec.tokens, strict=False)) if a != b),
        min(len(plain.tokens), len(spec.tokens)),
    )
    margin = plain_margin(engine, prompt, n)
    assert margin < NEAR_TIE, (n, margin, plain.text, spec.text)


def _cases() -> list[tuple[str, str]]:
    """Cursors in real code: the FIM examples of the engine tests and lines of stdlib modules."""
    cases = [
        (EXAMPLE.read_text().split("dates.append(")[0] + "dates.append(", ")\n    return dates\n"),
        ("def add(a, b):\n    return ", "\n\n\nprint(add(1, 2))\n"),
        ("numbers = [3, 1, 2]\nnumbers.so", "\nprint(numbers)\n"),
        (COPY_PREFIX, COPY_SUFFIX),
    ]
    for name, line in (("textwrap.py", 120), ("shlex.py", 200), ("json/encoder.py", 260)):
        lines = (STDLIB / name).read_text().split("\n")
        indent = len(lines[line]) - len(lines[line].lstrip())
        before = "\n".join(lines[:line]) + "\n" + lines[line][:indent]
        cases.append((before, "\n" + "\n".join(lines[line + 4 :])))
    return cases


@pytest.mark.parametrize("case", range(len(_cases())))
def test_greedy_output_is_the_same_with_and_without_speculation(small: Engine, case: int) -> None:
    prefix, suffix = _cases()[case]
    prompt = fim(small, prefix, suffix)
    plain = fresh(small, prompt, False, max_tokens=40)
    plain_cache = small.cached_tokens
    spec = fresh(small, prompt, True, max_tokens=40)
    spec_cache = small.cached_tokens
    assert plain.drafts == 0
    assert_same_unless_near_tie(small, prompt, plain, spec)
    if spec.tokens == plain.tokens:
        assert spec_cache == plain_cache  # the cache holds what plain decoding leaves


def test_default_model_same_output_and_drafts_accepted(default: Engine) -> None:
    prompt = fim(default, COPY_PREFIX, COPY_SUFFIX)
    plain = fresh(default, prompt, False, max_tokens=40)
    spec = fresh(default, prompt, True, max_tokens=40)
    assert spec.tokens == plain.tokens and spec.text == plain.text
    assert spec.accepted > 0 and spec.drafts < len(spec.tokens)
    assert 0 < spec.acceptance <= 1


def test_stop_rule_inside_an_accepted_draft_stops_at_the_same_token(small: Engine) -> None:
    prompt = fim(small, COPY_PREFIX, COPY_SUFFIX)
    full = fresh(small, prompt, True, max_tokens=40)
    assert full.accepted >= 4
    cut = len(small.detokenize(full.tokens[:5])) - 1  # inside the run the drafts covered

    def stop(text: str) -> tuple[str, int] | None:
        return ("stop_rule:test", cut) if len(text) > cut else None

    plain = fresh(small, prompt, False, max_tokens=40, stop=stop)
    plain_cache = small.cached_tokens
    spec = fresh(small, prompt, True, max_tokens=40, stop=stop)
    assert spec.stop_reason == plain.stop_reason == "stop_rule:test"
    assert (spec.tokens, spec.text) == (plain.tokens, plain.text)
    assert small.cached_tokens == plain_cache  # draft cells past the stop were dropped


def test_cancel_inside_an_accepted_draft_is_seen_at_the_next_token(small: Engine) -> None:
    prompt = fim(small, COPY_PREFIX, COPY_SUFFIX)

    def run(speculative: bool) -> tuple[Generation, tuple[int, ...]]:
        cancel = CancelToken()
        seen: list[str] = []

        def on_text(text: str) -> None:
            seen.append(text)
            if len(seen) == 8:
                cancel.cancel()

        gen = fresh(small, prompt, speculative, max_tokens=40, cancel=cancel, on_text=on_text)
        return gen, small.cached_tokens

    plain, plain_cache = run(False)
    spec, spec_cache = run(True)
    assert spec.stop_reason == plain.stop_reason == "cancelled"
    assert len(spec.tokens) == len(plain.tokens) == 8
    assert spec.accepted > 0  # drafts were accepted before the cancel
    assert spec_cache == plain_cache


def test_cache_after_rejected_drafts_serves_the_next_request_like_a_fresh_engine(small: Engine) -> None:
    prefix, suffix = _cases()[5]
    prompt = fim(small, prefix, suffix)
    first = fresh(small, prompt, True, max_tokens=48)
    assert first.drafted > first.accepted  # some drafts were rejected and removed from the cache
    assert small.cached_tokens[: len(prompt)] == tuple(prompt)
    assert len(small.cached_tokens) <= len(prompt) + len(first.tokens)
    # The next keystroke: the user typed the first generated characters; the prefix is reused.
    typed = small.detokenize(first.tokens[:2])
    prompt2 = fim(small, prefix + typed, suffix)
    reused = small.generate(prompt2, max_tokens=24, speculative=True)
    assert reused.tokens_reused > 0
    cold = fresh(small, prompt2, True, max_tokens=24)
    assert (reused.tokens, reused.text, reused.stop_reason) == (cold.tokens, cold.text, cold.stop_reason)


def test_max_tokens_is_exact_with_long_drafts(small: Engine) -> None:
    prompt = fim(small, COPY_PREFIX, COPY_SUFFIX)
    for n in (1, 2, 5, 9):
        plain = fresh(small, prompt, False, max_tokens=n)
        plain_cache = small.cached_tokens
        spec = fresh(small, prompt, True, max_tokens=n)
        assert spec.tokens == plain.tokens and len(spec.tokens) <= n
        assert small.cached_tokens == plain_cache
