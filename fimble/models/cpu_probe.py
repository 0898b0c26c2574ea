"""The probe child: ``python -m fimble.models.cpu_probe MODEL PATH`` loads MODEL on one CPU path and decodes.

It evaluates a short prompt in one batch (the matrix-matrix kernels a prompt takes) and then a few
single tokens (the matrix-vector kernels of generation), so every kernel family a completion uses has
run once. It prints one JSON line, ``{"ok": true, "extra_bufts": [...]}``, and exits 0; dying by a
signal on the way is the answer ``fimble.models.cpu_path`` is asking for. Its stdout is a pipe to the
parent, never a protocol channel.

``FIMBLE_PROBE_CRASH`` (tests only) makes the child kill itself on the paths it names, after the
model is loaded, as a faulting kernel would: ``full=SIGSEGV,no-amx=SIGILL``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

__all__ = ["main"]

_PROMPT = b"def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci("
_GENERATE = 3


def _crash_if_asked(path: str) -> None:
    for item in os.environ.get("FIMBLE_PROBE_CRASH", "").split(","):
        name, _, sig = item.partition("=")
        if name.strip() == path and sig:
            os.kill(os.getpid(), signal.Signals[sig.strip()])


def main(argv: list[str]) -> int:
    model, path_name = argv
    import llama_cpp

    from fimble.models.cpu_path import CpuPath, apply, extra_buffer_types

    @llama_cpp.llama_log_callback
    def _quiet(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        if level == 4:  # errors only: the parent keeps the child's last stderr lines
            sys.stderr.write(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    offered = extra_buffer_types()
    print(json.dumps({"ok": False, "extra_bufts": offered}), flush=True)  # known even if we die below
    mparams = llama_cpp.llama_model_default_params()
    apply(mparams, CpuPath(path_name))
    lm = llama_cpp.llama_model_load_from_file(model.encode(), mparams)
    if not lm:
        print(f"llama.cpp could not load {model}", file=sys.stderr)
        return 2
    _crash_if_asked(path_name)
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = 256
    cparams.n_batch = cparams.n_ubatch = 64
    # One thread runs the same kernels, and a probe on a busy machine (a compile on the other core)
    # takes 3 s instead of 13: ggml's worker threads spin-wait for each other.
    cparams.n_threads = cparams.n_threads_batch = 1
    ctx = llama_cpp.llama_init_from_model(lm, cparams)
    if not ctx:
        print("llama.cpp could not create a context", file=sys.stderr)
        return 2
    vocab = llama_cpp.llama_model_get_vocab(lm)
    tokens = (llama_cpp.llama_token * 64)()
    n = llama_cpp.llama_tokenize(vocab, _PROMPT, len(_PROMPT), tokens, 64, True, False)
    sampler = llama_cpp.llama_sampler_init_greedy()
    batch_tokens, count = tokens, n
    for _ in range(_GENERATE + 1):
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(batch_tokens, count)) != 0:
            print("llama_decode failed", file=sys.stderr)
            return 2
        batch_tokens = (llama_cpp.llama_token * 1)(llama_cpp.llama_sampler_sample(sampler, ctx, -1))
        count = 1
    llama_cpp.llama_sampler_free(sampler)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(lm)
    print(json.dumps({"ok": True, "extra_bufts": offered}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
