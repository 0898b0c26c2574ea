"""A model-free engine for the batch tests: plain prompts only, a deterministic answer per prompt."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fimble.completion.engine import BatchGeneration, Generation
from fimble.completion.prompt.fim import FimTokens

__all__ = ["BatchEchoEngine", "EchoEngine", "FixedEngine", "answer_for"]


def answer_for(prompt: str) -> str:
    """What ``EchoEngine`` generates after ``prompt``: its words reversed, then a newline and more."""
    return " ".join(reversed(prompt.split())) + "\nrest"


class EchoEngine:
    """Tokens are characters; ``generate`` replays ``answer_for`` the prompt through the stop check, as
    the real engine does token by token. ``delay`` seconds per item make a run slow enough to kill."""

    n_ctx = 4096

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[str] = []

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def generate(
        self, prompt: Sequence[int], *, max_tokens: int = 64, stop: Any = None, **_: Any
    ) -> Generation:
        text_in = "".join(map(chr, prompt))
        self.calls.append(text_in)
        if self.delay:
            time.sleep(self.delay)
        out, taken, reason = "", "", "max_tokens"
        for ch in self.answer(text_in)[:max_tokens]:
            out += ch
            taken += ch  # like the engine's tokens: the one a stop rule cut is still generated
            if stop is not None and (hit := stop(out)) is not None:
                reason, keep = hit
                out = out[:keep]
                break
        else:
            reason = "max_tokens" if len(out) >= max_tokens else "eog"
        return Generation(out, tuple(map(ord, taken)), reason, len(prompt), len(prompt), 0, 1.0, 2.0)

    def answer(self, prompt: str) -> str:
        return answer_for(prompt)

    def close(self) -> None:
        pass


class FixedEngine(EchoEngine):
    """``EchoEngine`` that answers every prompt with ``text`` (a docstring, then the closing quotes);
    it has FIM tokens (control characters, as tokens are characters here) so FIM items can be built."""

    fim = FimTokens(family="qwen", prefix=1, suffix=2, middle=3, repo_name=4, file_sep=5)

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def answer(self, prompt: str) -> str:
        return self.text


class BatchEchoEngine(EchoEngine):
    """``EchoEngine`` with batch slots: ``generate_batch`` answers every prompt as ``generate`` would,
    each with its own stop check from ``stops`` (``on_done`` told of each), and records the size of
    each batch."""

    batch_slots = (2, 3, 4)

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int = 64,
        stops: Sequence[Any] = (),
        on_done: Any = None,
        limits: Sequence[int] = (),
        guides: Sequence[Any] = (),
    ) -> list[BatchGeneration]:
        self.batches.append(len(prompts))
        out = []
        limits = limits or [max_tokens] * len(prompts)
        for i, (prompt, stop, limit) in enumerate(zip(prompts, stops, limits, strict=True)):
            gen = EchoEngine.generate(self, prompt, max_tokens=limit, stop=stop)
            out.append(BatchGeneration(**{f: getattr(gen, f) for f in gen.__dataclass_fields__}))
            if on_done is not None:
                on_done(i, out[-1])
        self.calls.clear()  # not decoded alone
        return out
