"""Warm-up with a real model through the Completer: a small first prompt, the full one evaluated
while idle, then requests in the same place use the full prompt at a few tokens each."""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

import pytest

from fimble.completion import warmup
from fimble.completion.completer import Completer
from fimble.completion.engine import Engine
from fimble.completion.loading import attach_warmup
from fimble.completion.service import CompletionRequest
from tests.model_paths import SMALL, model_path

pytestmark = pytest.mark.model

SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "argparse.py"  # 2,600 lines of real code


def _cursor(text: str, line: int) -> int:
    lines = text.split("\n")
    while not lines[line].strip():
        line += 1
    return sum(len(ln) + 1 for ln in lines[:line]) + len(lines[line]) - len(lines[line].lstrip())


def test_small_first_prompt_then_warm_full_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIMBLE_KV_STATE_DIR", str(tmp_path))
    warmup.configure(warmup.WarmupConfig(first_ms=1600))

    def load() -> Engine:
        engine = Engine(model_path(SMALL))
        attach_warmup(engine)
        return engine

    completer = Completer(load=load, prefetch=False)
    try:
        assert completer.wait_ready(300)
        engine = completer.worker.engine
        assert engine is not None and engine.warmer is not None and engine.store is not None
        text = SOURCE.read_text()

        def ask(line: int) -> tuple[int, int, int]:
            request = CompletionRequest(
                text=text, offset=_cursor(text, line), path="argparse.py", max_tokens=8
            )
            gen = completer.submit(request, key="argparse.py").future.result(300).generation
            return gen.prompt_tokens, gen.tokens_evaluated, gen.tokens_reused

        prompt_tokens, evaluated, _ = ask(1500)
        assert engine.warmer.first_prompts == 1
        assert prompt_tokens < 1000 and evaluated == prompt_tokens  # small (sized to the speed) and cold

        deadline = time.monotonic() + 300
        while (completer.worker.busy or engine.warmer.pending) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not engine.warmer.pending
        assert engine.warmer.warmed_tokens > 1000
        assert engine.store.flush(60)
        assert len(engine.store.entries()) == 1  # the warmed head, saved once idle

        prompt_tokens, evaluated, reused = ask(1501)  # the next line: warm now
        assert engine.warmer.first_prompts == 1
        assert prompt_tokens > 1000
        assert evaluated < 128 and reused == prompt_tokens - evaluated
    finally:
        completer.close()
        warmup.configure(warmup.WarmupConfig())
