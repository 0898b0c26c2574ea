"""Warm-up with a real model through the Completer: a small first prompt, the full one evaluated
while idle, then requests in the same place use the full prompt at a few tokens each."""

from __future__ import annotations

import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fimble.completion import warmup
from fimble.completion.completer import Completer
from fimble.completion.engine import Engine
from fimble.completion.engine.speed import SpeedMeter
from fimble.completion.prompt.fim import SUFFIX_TOKENS
from fimble.completion.service import CompletionRequest
from fimble.completion.warmup import attach_warmup
from tests.model_paths import SMALL, model_path

pytestmark = pytest.mark.model

SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "argparse.py"  # 2,600 lines of real code


def _cursor(text: str, line: int) -> int:
    lines = text.split("\n")
    while not lines[line].strip():
        line += 1
    return sum(len(ln) + 1 for ln in lines[:line]) + len(lines[line]) - len(lines[line].lstrip())


@pytest.fixture
def warming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """KV states in ``tmp_path`` and the default first-suggestion target, reset afterwards.

    The speeds the small prompt is sized from stay at their defaults: these tests are about where
    small prompts start and what is saved and read back, and on a busy machine the learned speed
    drops between two requests, so the second small prompt came out shorter than the first."""
    monkeypatch.setenv("FIMBLE_KV_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(SpeedMeter, "observe", lambda *args, **kwargs: None)
    warmup.configure(warmup.WarmupConfig(first_ms=1600))
    yield
    warmup.configure(warmup.WarmupConfig())


def _completer() -> Completer:
    """A completer on the small model with the warmer and KV store attached, ready to answer."""

    def load() -> Engine:
        return Engine(model_path(SMALL))

    completer = Completer(load=load, prefetch=False, warmup=attach_warmup)
    if not completer.wait_ready(300):
        completer.close()
        pytest.fail("the model did not load")
    return completer


@pytest.mark.usefixtures("warming")
def test_small_first_prompt_then_warm_full_prompt() -> None:
    completer = _completer()
    try:
        engine = completer.worker.engine
        warmer = completer.worker.warmer
        assert engine is not None and warmer is not None and engine.store is not None
        text = SOURCE.read_text()

        def ask(line: int) -> tuple[int, int, int]:
            # Budgets pinned above the defaults' ~900 tokens, so "full" and "small" stay far apart.
            request = CompletionRequest(
                text=text,
                offset=_cursor(text, line),
                path="argparse.py",
                max_tokens=8,
                prefix_budget=1536,
                suffix_budget=64,
            )
            gen = completer.submit(request, key="argparse.py").future.result(300).generation
            return gen.prompt_tokens, gen.tokens_evaluated, gen.tokens_reused

        prompt_tokens, evaluated, _ = ask(1500)
        assert warmer.first_prompts == 1
        assert prompt_tokens < 1000 and evaluated == prompt_tokens  # small (sized to the speed) and cold

        deadline = time.monotonic() + 300
        while (completer.worker.busy or warmer.pending) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not warmer.pending
        assert warmer.warmed_tokens > 1000
        assert engine.store.flush(60)
        # The small prompt's head, saved when warming began, and the warmed head, saved once idle.
        sizes = sorted(e.n_tokens for e in engine.store.entries())
        assert len(sizes) == 2 and sizes[0] < prompt_tokens < 1000 < sizes[1]

        prompt_tokens, evaluated, reused = ask(1501)  # the next line: warm now
        assert warmer.first_prompts == 1
        assert prompt_tokens > 1000
        assert evaluated < 128 and reused == prompt_tokens - evaluated
    finally:
        completer.close()


@pytest.mark.usefixtures("warming")
def test_back_at_the_next_line_after_a_switch_reads_the_small_head_back() -> None:
    """Type in one file, go to another, come back one line further down: the small prompt starts at
    the line the last one did, its saved head is read back, and only the new line, the suffix and
    the middle are evaluated."""
    completer = _completer()
    try:
        engine = completer.worker.engine
        warmer = completer.worker.warmer
        assert engine is not None and warmer is not None and engine.store is not None
        a = SOURCE.read_text()
        b = (SOURCE.parent / "textwrap.py").read_text()

        def ask(text: str, line: int, path: str) -> tuple[int, int, int]:
            request = CompletionRequest(text=text, offset=_cursor(text, line), path=path, max_tokens=8)
            gen = completer.submit(request, key=path).future.result(300).generation
            return gen.prompt_tokens, gen.tokens_evaluated, gen.tokens_reused

        first_tokens, first_evaluated, _ = ask(a, 1500, "argparse.py")
        assert warmer.first_prompts == 1 and first_evaluated == first_tokens  # small and cold
        ask(b, 300, "textwrap.py")  # the engine leaves argparse.py (its full prompt never warmed)
        assert warmer.first_prompts == 2
        assert engine.store.flush(60)
        restored = engine.tokens_restored

        prompt_tokens, evaluated, reused = ask(a, 1501, "argparse.py")
        assert warmer.first_prompts == 3  # still a small prompt, the region is not warm
        assert engine.tokens_restored > restored  # argparse.py's small head, read back
        assert prompt_tokens >= first_tokens  # from the same start line, one line longer
        # The new line, the suffix (a first prompt's lines below the cursor: their whole budget), the middle.
        assert evaluated < SUFFIX_TOKENS + 40 and reused == prompt_tokens - evaluated

        # After a restart too: the start line was kept beside the states, not only in memory.
        ask(b, 301, "textwrap.py")  # leave argparse.py again: its small head is saved
        assert engine.store.flush(60)
        completer.close()
        completer = _completer()
        engine = completer.worker.engine
        warmer = completer.worker.warmer
        assert engine is not None and warmer is not None
        prompt_tokens, evaluated, reused = ask(a, 1502, "argparse.py")
        assert engine.tokens_restored > 0 and prompt_tokens >= first_tokens
        assert evaluated < SUFFIX_TOKENS + 40 and reused == prompt_tokens - evaluated
    finally:
        completer.close()
