"""How fast this machine evaluates prompts and generates tokens, learned from requests.

The warm-up sizes a cold region's small first prompt from these speeds (``Warmer.choose``), so they
must follow the machine (another model, a busy CPU) rather than stay a constant.
"""

from __future__ import annotations

__all__ = ["SpeedMeter"]


class SpeedMeter:
    """Prompt and generation speed of this machine, learned from requests (moving averages).

    Starts from the 1.5B model's speeds on a 2-core laptop; the first requests correct them.
    """

    def __init__(self, prompt_tps: float = 90.0, ms_per_token: float = 36.0, alpha: float = 0.3) -> None:
        self.prompt_tps = prompt_tps
        self.ms_per_token = ms_per_token
        self._alpha = alpha
        self._seen_prompt = self._seen_generation = False  # the first observation replaces a default

    def observe(self, evaluated: int, prompt_ms: float, generated: int, generation_ms: float) -> None:
        if evaluated >= 32 and prompt_ms > 0:
            a = self._alpha if self._seen_prompt else 1.0
            self.prompt_tps += a * (evaluated / prompt_ms * 1000 - self.prompt_tps)
            self._seen_prompt = True
        if generated >= 4 and generation_ms > 0:
            a = self._alpha if self._seen_generation else 1.0
            self.ms_per_token += a * (generation_ms / generated - self.ms_per_token)
            self._seen_generation = True

    def prompt_budget(self, target_ms: float, generated: int) -> int:
        """Tokens that can be evaluated within ``target_ms`` while leaving time to generate."""
        return int(max(0.0, target_ms - generated * self.ms_per_token) * self.prompt_tps / 1000)
