"""The probe child: ``python -m fimble.models.cpu_probe MODEL PATH THREADS`` loads MODEL on one CPU path and
decodes.

It evaluates a prompt in one batch (the matrix-matrix kernels a prompt takes) and then single tokens
(the matrix-vector kernels of generation), so every kernel family a completion uses has run, and
times both: the reference request of ``fimble.models.cpu_path``. It prints one JSON line,
``{"ok": true, "extra_bufts": [...], "prompt_tok_s": ..., "gen_tok_s": ...}``, and exits 0; dying by
a signal on the way is the answer the parent is asking for. Its stdout is a pipe to the parent, never
a protocol channel.

``FIMBLE_PROBE_CRASH`` (tests only) makes the child kill itself on the paths it names, after the
model is loaded, as a faulting kernel would: ``full=SIGSEGV,no-amx=SIGILL``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _crash_if_asked(path: str) -> None:
    for item in os.environ.get("FIMBLE_PROBE_CRASH", "").split(","):
        name, _, sig = item.partition("=")
        if name.strip() == path and sig:
            os.kill(os.getpid(), signal.Signals[sig.strip()])


def main(argv: list[str]) -> int:
    model, path_name, threads_arg = argv
    threads = int(threads_arg)
    import llama_cpp

    from fimble.models.cpu_path import (
        REFERENCE_GENERATE,
        TIMED_PROMPT,
        CpuPath,
        apply,
        extra_buffer_types,
    )

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
    cparams.n_batch = cparams.n_ubatch = TIMED_PROMPT
    # As many threads as the engine will use: which path is faster can differ between one thread and
    # two (the 0.5B here: plain wins on one, full on two).
    cparams.n_threads = cparams.n_threads_batch = threads
    ctx = llama_cpp.llama_init_from_model(lm, cparams)
    if not ctx:
        print("llama.cpp could not create a context", file=sys.stderr)
        return 2
    text = Path(__file__).read_bytes()  # real code, and more than enough of it
    vocab = llama_cpp.llama_model_get_vocab(lm)
    tokens = (llama_cpp.llama_token * len(text))()
    n = llama_cpp.llama_tokenize(vocab, text, len(text), tokens, len(text), True, False)
    if n < TIMED_PROMPT:
        print(f"only {n} tokens to probe with", file=sys.stderr)
        return 2
    sampler = llama_cpp.llama_sampler_init_greedy()

    def decode(batch: object, count: int) -> None:
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(batch, count)) != 0:
            raise RuntimeError("llama_decode failed")

    decode(tokens, 8)  # the first decode sets up the graph and buffers: not part of the timing
    prompt_s = float("inf")
    for _ in range(2):  # the better of two: a neighbour's burst should not decide the path
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        started = time.perf_counter()
        decode(tokens, TIMED_PROMPT)
        prompt_s = min(prompt_s, time.perf_counter() - started)
    decode((llama_cpp.llama_token * 1)(llama_cpp.llama_sampler_sample(sampler, ctx, -1)), 1)  # set-up
    started = time.perf_counter()
    for _ in range(REFERENCE_GENERATE):
        decode((llama_cpp.llama_token * 1)(llama_cpp.llama_sampler_sample(sampler, ctx, -1)), 1)
    gen_s = time.perf_counter() - started
    llama_cpp.llama_sampler_free(sampler)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(lm)
    speed = {"prompt_tok_s": TIMED_PROMPT / prompt_s, "gen_tok_s": REFERENCE_GENERATE / gen_s}
    print(json.dumps({"ok": True, "extra_bufts": offered} | speed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
