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


def test_the_weights_are_read_in_unless_memory_mapping_is_asked_for() -> None:
    """A mapped model file truncated while serving kills the process (SIGBUS), so the default reads
    it in. llama.cpp's ``use_mmap`` field became ``load_mode``: setting the old name on the ctypes
    struct would change nothing, silently."""
    params = llama_cpp.llama_model_default_params()
    assert engine.EngineConfig().use_mmap is False
    engine._set_load_mode(llama_cpp, params, False)
    assert params.load_mode == llama_cpp.LLAMA_LOAD_MODE_NONE
    engine._set_load_mode(llama_cpp, params, True)
    assert params.load_mode == llama_cpp.LLAMA_LOAD_MODE_MMAP
