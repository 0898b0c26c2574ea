"""The speed meter: moving averages of measured speeds, and the prompt they leave time for."""

from __future__ import annotations

import pytest

from fimble.completion.engine.speed import SpeedMeter


def test_speed_meter_sizes_the_prompt_to_the_target() -> None:
    meter = SpeedMeter(prompt_tps=100.0, ms_per_token=50.0)
    assert meter.prompt_budget(1500, 10) == 100  # 1 s left for the prompt at 100 tok/s
    assert meter.prompt_budget(400, 10) == 0
    meter.observe(200, 1000.0, 10, 300.0)  # 200 tok/s, 30 ms a token
    assert meter.prompt_tps > 100 and meter.ms_per_token < 50
    meter.observe(8, 1.0, 1, 1.0)  # too few tokens to say anything
    assert meter.prompt_tps == pytest.approx(200.0)  # the first observation replaced the default
    meter.observe(100, 1000.0, 10, 300.0)  # later ones are averaged in
    assert 100 < meter.prompt_tps < 200
