"""The engine without a model: how llama.cpp's log lines reach Python."""

from __future__ import annotations

import llama_cpp

from fimble.completion import engine


def test_the_llama_log_callback_is_installed_once_and_kept() -> None:
    """Every engine asks for it; replacing it would free the C callback another thread may be in."""
    engine._install_log_callback(llama_cpp)
    first = engine._log_callback
    engine._install_log_callback(llama_cpp)
    assert first is not None and engine._log_callback is first
