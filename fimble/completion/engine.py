"""The llama.cpp engine: one GGUF model, one context, one KV sequence that is reused between requests.

Built on llama-cpp-python's low-level C API rather than ``Llama.create_completion`` because fimble
needs control the high-level API hides: prompts as token ids with FIM tokens spliced in, a KV cache
whose contents we track token by token (longest common prefix reuse now, chunk shifting later),
greedy decoding that checks stop rules per token, and cancellation both between tokens and inside a
long prompt evaluation (llama.cpp's abort callback).

The engine is not thread-safe: exactly one thread (``fimble.completion.worker``) owns it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fimble.completion.cancel import CancelToken
from fimble.completion.fim import FimTokens, candidate_texts, detect_fim
from fimble.completion.kvplan import Chunk, ReusePlan, plan_reuse
from fimble.completion.kvstore import KVEntry, KVStore
from fimble.completion.speculative import DraftPolicy, DraftStats, PromptLookup
from fimble.errors import Cancelled, EngineError, ModelCorrupt
from fimble.models import cpu_path

if TYPE_CHECKING:
    from fimble.completion.guide import Guide

__all__ = ["Engine", "EngineConfig", "Generation", "StopCheck", "default_threads"]

log = logging.getLogger(__name__)

# A batch's greedy choice leading the runner-up by less than this (in logits) is not trusted: batched
# and single-token kernels round differently (see ``Engine._step``).
_TIE_MARGIN = 1.0

# Called with the text generated so far; returns (reason, keep) to stop, keeping text[:keep], or None.
StopCheck = Callable[[str], "tuple[str, int] | None"]


def default_threads() -> int:
    """Physical cores: llama.cpp gains nothing from SMT siblings and loses to contention."""
    try:
        import psutil

        return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)
    except Exception:  # pragma: no cover - psutil is a dependency, but never fail on this
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class EngineConfig:
    n_ctx: int = 4096
    n_batch: int = 512
    threads: int = 0  # 0 = physical cores
    reuse_min_chunk: int = 8  # shortest cached run worth moving instead of evaluating; 0 = prefix only
    abort_min_tokens: int = 64  # shorter prompt evaluations run to the end when cancelled (not background)
    restore_min_gain: int = 32  # load a saved state only when it spares evaluating at least this many tokens
    # False: the weights are read into memory. A memory-mapped model file that is truncated or
    # overwritten in place while the server runs (``cp new.gguf model.gguf``) kills the process with
    # SIGBUS at the next token; read into memory, it keeps serving from what it loaded.
    use_mmap: bool = False
    speculative: bool = True  # check prompt-lookup drafts in batches (same greedy output, fewer steps)



def _set_load_mode(llama_cpp: Any, mparams: Any, use_mmap: bool) -> None:
    """Memory-map the weights or read them in. Newer llama.cpp says it with ``load_mode`` (the old
    ``use_mmap`` field is gone; ctypes would take the assignment silently and change nothing)."""
    fields = {name for name, *_ in type(mparams)._fields_}
    if "load_mode" in fields:
        mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP if use_mmap else llama_cpp.LLAMA_LOAD_MODE_NONE
    elif "use_mmap" in fields:
        mparams.use_mmap = use_mmap

@dataclass(frozen=True)
class Generation:
    """What one request cost and produced; every front door reports these numbers."""

    text: str
    tokens: tuple[int, ...]
    stop_reason: str  # eog | newline | stop_rule:<name> | max_tokens | cancelled | context_full
    prompt_tokens: int
    tokens_evaluated: int
    tokens_reused: int
    prompt_ms: float
    generation_ms: float
    drafts: int = 0  # decoding steps that checked a draft (speculative decoding)
    drafted: int = 0  # draft tokens checked
    accepted: int = 0  # draft tokens the model agreed with (each spared one decoding step)
    guide: str = ""  # an import line's guide: "kept" to its choices, "released" to the model, "" none

    @property
    def tokens_per_s(self) -> float:
        """Effective generation speed: generated tokens over the generation time."""
        return len(self.tokens) / self.generation_ms * 1000 if self.generation_ms > 0 else 0.0

    @property
    def acceptance(self) -> float:
        """Share of drafted tokens accepted (0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0


# ggml_log_level: 0 none, 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_LOG_LEVELS = {3: logging.INFO, 4: logging.WARNING}  # its warnings are mostly model-file trivia
_llama_logger = logging.getLogger("fimble.llama")
# Set while a decode is being aborted on purpose (a newer keystroke): llama.cpp then logs its "failed
# to compute graph / failed to decode, ret = 2" lines as warnings, which are normal here, not news.
_aborting = threading.Event()


_log_lock = threading.Lock()
_log_callback: object = None  # the C callback llama.cpp logs through; set once, never freed


def _install_log_callback(llama_cpp) -> None:  # type: ignore[no-untyped-def]
    """Route llama.cpp's log lines to Python logging (stderr), never stdout.

    Once per process, and the callback is kept for good: llama.cpp calls it from whichever thread
    logs, e.g. an old engine's ``llama_free`` during a model switch while the new engine loads.
    Installing a new one per engine freed the previous C thunk under that thread: a segfault that
    killed the server during a threads change (``tests/completion/test_engine_model.py`` reproduces it).
    """
    global _log_callback
    with _log_lock:
        if _log_callback is not None:
            return

        @llama_cpp.llama_log_callback
        def _callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
            lvl = logging.DEBUG if _aborting.is_set() else _LOG_LEVELS.get(level, logging.DEBUG)
            if _llama_logger.isEnabledFor(lvl):
                _llama_logger.log(lvl, "%s", text.decode("utf-8", "replace").rstrip())

        llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
        _log_callback = _callback


class Engine:
    """A loaded model with a reusable KV cache.

    ``generate`` evaluates only the prompt tokens that differ from what the KV cache already holds
    (longest common prefix), then decodes greedily until a stop.
    """

    def __init__(self, model_path: str | Path, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self.model_path = Path(model_path)
        # Before llama.cpp is imported here: on a CPU it cannot run, only a child process may find out.
        self.cpu = cpu_path.verdict_for(self.model_path, on_probe=self._probing)
        if self.cpu.path is None:
            raise EngineError(self.cpu.problem())
        if self.cpu.path is not cpu_path.CpuPath.FULL and not self.cpu.faster:  # a fallback: at every load
            log.warning("CPU path for %s: %s", self.model_path.name, self.cpu.summary())
        elif not self.cpu.cached:
            log.info("CPU path for %s: %s", self.model_path.name, self.cpu.summary())

        import llama_cpp
        import numpy as np

        self._ll = llama_cpp
        self._np = np
        _install_log_callback(llama_cpp)
        llama_cpp.llama_backend_init()
        started = time.perf_counter()
        mparams = llama_cpp.llama_model_default_params()
        _set_load_mode(llama_cpp, mparams, self.config.use_mmap)
        cpu_path.apply(mparams, self.cpu.path)
        self._model = llama_cpp.llama_model_load_from_file(str(self.model_path).encode(), mparams)
        if not self._model:
            raise ModelCorrupt(
                f"llama.cpp could not load {self.model_path}: the file is not a usable GGUF model. "
                "Run `fimble models verify` and, if it fails, `fimble models pull NAME --force`."
            )
        self.threads = self.config.threads or default_threads()
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = self.config.n_ctx
        cparams.n_batch = self.config.n_batch
        cparams.n_ubatch = self.config.n_batch
        cparams.n_threads = self.threads
        cparams.n_threads_batch = self.threads
        cparams.no_perf = True
        # A second sequence parks moved chunks while the tokens before them are evaluated (see
        # ``prepare``); one unified KV buffer makes moving cells between sequences metadata-only.
        cparams.n_seq_max = 2
        cparams.kv_unified = True
        self._ctx = llama_cpp.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            llama_cpp.llama_model_free(self._model)
            raise EngineError(
                f"llama.cpp could not create a context of {self.config.n_ctx} tokens; "
                "lower n_ctx or free memory (`fimble doctor` shows what is available)."
            )
        self.load_ms = (time.perf_counter() - started) * 1000
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        self._batch = llama_cpp.llama_batch_init(self.config.n_batch, 0, 1)
        self._cached: list[int] = []  # the tokens whose KV sits in sequence 0, in position order
        self._cancel: CancelToken | None = None
        self._abort_armed = False
        self._can_shift = bool(llama_cpp.llama_memory_can_shift(self._mem))
        self.tokens_shifted = 0  # KV cells moved instead of evaluated, since load (for status/bench)
        self.store: KVStore | None = None  # saved states on disk (``attach_store``)
        self.tokens_restored = 0  # KV cells read back from disk instead of evaluated, since load
        self.last_restore: dict[str, float] = {}  # tokens and ms of the last state read back
        self._abort_cb = llama_cpp.ggml_abort_callback(self._should_abort)
        llama_cpp.llama_set_abort_callback(self._ctx, self._abort_cb, None)
        self._piece_buf = ctypes.create_string_buffer(256)
        self.fim = self._detect_fim()
        self.speculative = self.config.speculative  # per-request override: ``generate(speculative=)``
        self.draft_policy = DraftPolicy()  # learns how long drafts should be, across requests

    def _probing(self, path: str) -> None:
        log.warning(
            "first load of %s here: probing how llama.cpp runs on this CPU, the %s path "
            "(a child process; once per machine and model)",
            self.model_path.name,
            path,
        )

    # -- vocabulary ---------------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Tokenize file text; ``special=False`` so control-token text in a file stays plain text."""
        data = text.encode("utf-8", "surrogatepass")
        n_max = len(data) + 8
        buf = (self._ll.llama_token * n_max)()
        n = self._ll.llama_tokenize(self._vocab, data, len(data), buf, n_max, False, special)
        if n < 0:  # pragma: no cover - n_max always suffices for byte-level BPE
            buf = (self._ll.llama_token * -n)()
            n = self._ll.llama_tokenize(self._vocab, data, len(data), buf, -n, False, special)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        n = self._ll.llama_token_to_piece(self._vocab, token, self._piece_buf, len(self._piece_buf), 0, False)
        if n < 0:  # pragma: no cover - pieces longer than 256 bytes
            buf = ctypes.create_string_buffer(-n)
            n = self._ll.llama_token_to_piece(self._vocab, token, buf, -n, 0, False)
            return buf.raw[:n]
        return self._piece_buf.raw[:n]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(self._ll.llama_vocab_is_eog(self._vocab, token))

    def _special_id(self, text: str) -> int | None:
        ids = self.tokenize(text, special=True)
        return ids[0] if len(ids) == 1 else None

    def _detect_fim(self) -> FimTokens:
        vocab = {t: i for t in candidate_texts() if (i := self._special_id(t)) is not None}
        eog = frozenset(i for i in vocab.values() if self.is_eog(i))
        return detect_fim(vocab, eog)

    # -- KV cache -------------------------------------------------------------------------------

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        return tuple(self._cached)

    def reset(self) -> None:
        """Forget the KV cache (tests and benchmarks start cold with it)."""
        self._ll.llama_memory_clear(self._mem, True)
        self._cached = []

    def _should_abort(self, _data: ctypes.c_void_p) -> bool:
        if self._abort_armed and self._cancel is not None and self._cancel.cancelled:
            _aborting.set()  # cleared when the decode returns (``_decode_at``)
            return True
        return False

    def _apply_plan(self, plan: ReusePlan, prompt: Sequence[int]) -> None:
        """Drop what the plan does not keep and move reused chunks to their new positions."""
        ll = self._ll
        for p0, p1 in reversed(plan.gaps()):
            ll.llama_memory_seq_rm(self._mem, 0, p0, p1 if p1 < plan.cached_len else -1)
        # Right shifts from the last chunk, then left shifts from the first: no two runs ever collide.
        for c in reversed(plan.chunks):
            if c.shift > 0:
                ll.llama_memory_seq_add(self._mem, 0, c.src, c.src + c.n, c.shift)
        for c in plan.chunks:
            if c.shift < 0:
                ll.llama_memory_seq_add(self._mem, 0, c.src, c.src + c.n, c.shift)
        # The record now has holes where tokens are still to be evaluated; -1 never matches a token.
        cells = [-1] * len(prompt)
        cells[: plan.head] = prompt[: plan.head]
        for c in plan.chunks:
            cells[c.dst : c.dst + c.n] = prompt[c.dst : c.dst + c.n]
        self._cached = cells
        self.tokens_shifted += sum(c.n for c in plan.chunks if c.shift)

    def _decode_at(self, cells: Sequence[tuple[int, int]], logits: bool = True) -> None:
        """Evaluate (position, token) cells in increasing position order; logits for the last only.

        The abort callback is armed only for long evaluations: aborting a few tokens saves little,
        and llama.cpp drops every cell from the aborted batch's first position on, which would lose
        the chunks just moved into place. Background work (a prefetch) is the exception: nobody
        waits for it, so a keystroke should not wait for its few dozen tokens (~10 ms each) either.
        """
        batch = self._batch
        step = self.config.n_batch
        background = self._cancel is not None and self._cancel.background
        arm = background or len(cells) > self.config.abort_min_tokens
        for start in range(0, len(cells), step):
            chunk = cells[start : start + step]
            for i, (pos, tok) in enumerate(chunk):
                batch.token[i] = tok
                batch.pos[i] = pos
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = False
            batch.logits[len(chunk) - 1] = logits and start + len(chunk) == len(cells)
            batch.n_tokens = len(chunk)
            self._abort_armed = arm
            try:
                rc = self._ll.llama_decode(self._ctx, batch)
            finally:
                self._abort_armed = False
                _aborting.clear()
            if rc == 0:
                for pos, tok in chunk:
                    if pos == len(self._cached):
                        self._cached.append(tok)
                    else:
                        self._cached[pos] = tok
                continue
            # Aborted or failed: llama.cpp removed the batch's cells from its first position on.
            self._truncate_record(chunk[0][0])
            if rc == 2 or (self._cancel is not None and self._cancel.cancelled):
                raise Cancelled("cancelled during prompt evaluation")
            raise EngineError(f"llama_decode failed with code {rc}; see the log (run with -vv)")

    def _truncate_record(self, n: int) -> None:
        self._ll.llama_memory_seq_rm(self._mem, 0, n, -1)
        del self._cached[n:]
        if -1 in self._cached:  # a hole left by an unfinished evaluation: nothing after it is valid
            self._truncate_record(self._cached.index(-1))

    def _argmax(self) -> int:
        ptr = self._ll.llama_get_logits_ith(self._ctx, -1)
        logits = self._np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        return int(logits.argmax())

    def _guided(self, guide: Guide, text: str, k: int = 24) -> int:
        """The guide's pick among the model's ``k`` best next tokens (by logit)."""
        np = self._np
        ptr = self._ll.llama_get_logits_ith(self._ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        top = np.argpartition(logits, -k)[-k:]
        top = top[np.argsort(-logits[top], kind="stable")]
        ranked = [(int(t), self.piece(int(t)).decode("utf-8", "replace"), float(logits[t])) for t in top]
        return guide.pick(text, ranked)

    def prepare(
        self, prompt: Sequence[int], cancel: CancelToken | None = None, reuse_limit: int = 0
    ) -> tuple[int, int]:
        """Make the KV cache hold ``prompt``; returns (tokens reused, tokens evaluated).

        Besides the longest common prefix, runs of at least ``reuse_min_chunk`` tokens within
        ``prompt[:reuse_limit]`` that the cache holds at other positions (a repository chunk after the
        one before it was swapped) are moved into place with a position shift instead of being
        evaluated again. Their KV was computed against the old text before them: an approximation
        llama.cpp's server makes too with ``--cache-reuse``, acceptable for self-contained chunks
        only, hence the limit (0: prefix reuse only). The last prompt token is always evaluated,
        because its logits are needed for the first generated token.
        """
        if len(prompt) >= self.n_ctx:
            raise EngineError(f"prompt of {len(prompt)} tokens does not fit the context of {self.n_ctx}")
        min_chunk = self.config.reuse_min_chunk if self._can_shift else 0
        if self.store is not None:
            self._restore_if_better(prompt, min_chunk, reuse_limit)
        plan = plan_reuse(self._cached, prompt, min_chunk, limit=reuse_limit)
        self._apply_plan(plan, prompt)
        missing = plan.missing(len(prompt))
        self._cancel = cancel
        try:
            self._evaluate_around_chunks(prompt, missing, plan.chunks)
        finally:
            self._cancel = None
        return len(prompt) - len(missing), len(missing)

    # -- KV state on disk -----------------------------------------------------------------------

    def attach_store(self, store: KVStore | None) -> None:
        """Read states back from ``store`` when a prompt matches one better than the cache does."""
        self.store = store

    def evaluation_cost(self, prompt: Sequence[int], reuse_limit: int = 0) -> int:
        """How many tokens ``prepare(prompt)`` would evaluate, counting a state it would read back."""
        min_chunk = self.config.reuse_min_chunk if self._can_shift else 0
        reused = plan_reuse(self._cached, prompt, min_chunk, limit=reuse_limit).reused
        if self.store is not None and (hit := self.store.match(prompt)) is not None:
            reused = max(reused, min(hit[1], len(prompt) - 1))
        return len(prompt) - reused

    def _restore_if_better(self, prompt: Sequence[int], min_chunk: int, reuse_limit: int) -> None:
        """Replace the cache with the saved state sharing the longest prefix with ``prompt``, when
        that spares at least ``restore_min_gain`` evaluations over what the cache can reuse."""
        assert self.store is not None
        hit = self.store.match(prompt)
        if hit is None:
            return
        entry, n = hit
        n = min(n, len(prompt) - 1)
        gain = self.config.restore_min_gain
        head = 0
        for a, b in zip(self._cached, prompt, strict=False):
            if a != b:
                break
            head += 1
        if n < head + gain:
            return
        if n < plan_reuse(self._cached, prompt, min_chunk, limit=reuse_limit).reused + gain:
            return
        self.restore(entry)

    def restore(self, entry: KVEntry) -> bool:
        """Load a saved state into sequence 0 (replacing the cache); False when it is unusable."""
        assert self.store is not None
        t0 = time.perf_counter()
        blob = self.store.read(entry)
        if blob is None:
            return False
        ll = self._ll
        ll.llama_memory_clear(self._mem, True)  # every cell free: the state is read into one run
        self._cached = []
        buf = (ctypes.c_uint8 * len(blob)).from_buffer(blob)
        ok = ll.llama_state_seq_set_data(self._ctx, buf, len(blob), 0)
        del buf
        if not ok:
            ll.llama_memory_clear(self._mem, True)
            self.store.forget(entry, "llama.cpp refused it")
            return False
        self._cached = [int(t) for t in entry.tokens]
        self.tokens_restored += entry.n_tokens
        self.last_restore = {"tokens": entry.n_tokens, "ms": round((time.perf_counter() - t0) * 1000, 1)}
        log.debug("read back %d tokens of KV state in %.0f ms", entry.n_tokens, self.last_restore["ms"])
        return True

    def snapshot(self, n: int) -> tuple[list[int], memoryview] | None:
        """Copy the KV of the first ``n`` cached tokens out of llama.cpp (None: nothing to copy).

        Sequence 1 (free between requests; ``prepare`` parks chunks there only while it runs) gets a
        metadata-only copy of positions [0, n) of sequence 0, and that sequence is serialized: the
        suffix and generated tokens after the stable head are not worth keeping.
        """
        n = min(n, len(self._cached))
        if -1 in self._cached[:n]:
            n = self._cached.index(-1)
        if n <= 0:
            return None
        ll, mem = self._ll, self._mem
        ll.llama_memory_seq_rm(mem, 1, -1, -1)
        ll.llama_memory_seq_cp(mem, 0, 1, 0, n)
        try:
            size = ll.llama_state_seq_get_size(self._ctx, 1)
            buf = (ctypes.c_uint8 * size)()
            got = ll.llama_state_seq_get_data(self._ctx, buf, size, 1)
        finally:
            ll.llama_memory_seq_rm(mem, 1, -1, -1)
        if not got:
            return None
        return self._cached[:n], memoryview(buf).cast("B")[:got]

    def save_state(
        self, n: int, *, wait: bool = False, slack: int | None = None, file_start: int | None = None
    ) -> bool:
        """Save the first ``n`` cached tokens' KV to the store unless it already holds (nearly) them.

        Only the copy out of llama.cpp happens on this (the engine's) thread; the disk write runs on
        the store's writer thread unless ``wait``. ``file_start``: where the file's own tokens begin
        (``KVStore.save`` replaces older states of the same file with it).
        """
        if self.store is None:
            return False
        n = min(n, len(self._cached))
        head = self._cached[:n]
        if -1 in head:
            head = head[: head.index(-1)]
        slack = self.config.restore_min_gain if slack is None else slack
        if len(head) < self.config.restore_min_gain or self.store.covered(head, slack=slack):
            return False
        snap = self.snapshot(len(head))
        if snap is None:
            return False
        if wait:
            return self.store.save(*snap, file_start) is not None
        self.store.save_async(*snap, file_start)
        return True

    def _evaluate_around_chunks(
        self, prompt: Sequence[int], missing: list[int], chunks: Sequence[Chunk]
    ) -> None:
        """Evaluate the missing positions while moved chunks sit after some of them.

        llama.cpp only accepts tokens at positions after everything their sequence already holds.
        So chunks that lie after the first missing position are parked in sequence 1 (invisible to
        sequence 0), and each is brought back just before the first missing token that follows it.
        This costs one extra decode call per chunk boundary (~one weight pass), far less than
        evaluating the chunk again.
        """
        ll, mem = self._ll, self._mem
        first = missing[0]
        parked = [c for c in chunks if c.dst > first]
        for c in parked:
            ll.llama_memory_seq_cp(mem, 0, 1, c.dst, c.dst + c.n)
            ll.llama_memory_seq_rm(mem, 0, c.dst, c.dst + c.n)
        try:
            group: list[tuple[int, int]] = []
            for pos in missing:
                if parked and parked[0].dst < pos:
                    if group:
                        self._decode_at(group, logits=False)
                        group = []
                    while parked and parked[0].dst < pos:
                        c = parked.pop(0)
                        ll.llama_memory_seq_cp(mem, 1, 0, c.dst, c.dst + c.n)
                        ll.llama_memory_seq_rm(mem, 1, c.dst, c.dst + c.n)
                group.append((pos, prompt[pos]))
            self._decode_at(group)
        finally:
            # On a cancel or failure, chunks still parked are dropped along with what follows them.
            if parked:
                ll.llama_memory_seq_rm(mem, 1, -1, -1)
                self._truncate_record(parked[0].dst)

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int = 64,
        stop: StopCheck | None = None,
        cancel: CancelToken | None = None,
        on_text: Callable[[str], None] | None = None,
        reuse_limit: int = 0,
        speculative: bool | None = None,
        guide: Guide | None = None,
    ) -> Generation:
        """Greedy completion of ``prompt`` (token ids).

        Stops on an end-of-generation token, the FIM family's stop tokens, ``stop`` (checked on the
        decoded text after every token), ``max_tokens``, a full context, or ``cancel`` (checked between
        tokens). ``on_text`` receives the text so far after each token (for streaming).

        With ``speculative`` (default: ``self.speculative``), each decoding step also checks a draft
        of the next tokens looked up in the prompt (``fimble.completion.speculative``) in the same
        batch. Tokens come out of the model one at a time either way and go through the same checks
        in the same order; only the KV cells of tokens a plain decode would not have computed yet are
        dropped at the end, so the output, the stop reasons and the cache are those of plain decoding.

        A ``guide`` (``fimble.completion.guide``) picks each token from the model's best few instead
        of the argmax; guided decoding is plain (no drafts): the lines it guides are short.
        """
        import codecs

        t0 = time.perf_counter()
        try:
            reused, evaluated = self.prepare(prompt, cancel, reuse_limit)
        except Cancelled:
            ms = (time.perf_counter() - t0) * 1000
            return Generation("", (), "cancelled", len(prompt), 0, 0, ms, 0.0)
        t1 = time.perf_counter()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        out_tokens: list[int] = []
        text = ""
        reason = "max_tokens"
        stop_ids = self.fim.stop
        spec = (self.speculative if speculative is None else speculative) and guide is None
        lookup = self._lookup(prompt) if spec else None
        stats = DraftStats()
        # Next tokens the model has already chosen; all but the last have their KV cells computed
        # (accepted draft tokens), which a plain decode would compute only when it got to them.

        def pick() -> int:  # the model's next token, or the guide's choice for the text so far
            return self._argmax() if guide is None else self._guided(guide, text)

        chosen: deque[int] = deque([pick()])
        ahead = 0  # such cells at the end of the cache, dropped on leaving the loop
        self._cancel = cancel
        try:
            while len(out_tokens) < max_tokens:
                ahead = len(chosen) - 1
                if cancel is not None and cancel.cancelled:
                    reason = "cancelled"
                    break
                tok = chosen.popleft()
                ahead = len(chosen)
                if tok in stop_ids or self.is_eog(tok):
                    reason = "eog"
                    break
                out_tokens.append(tok)
                text += decoder.decode(self.piece(tok))
                if stop is not None and (hit := stop(text)) is not None:
                    reason, keep = hit
                    text = text[:keep]
                    break
                if on_text is not None:
                    on_text(text)
                if len(self._cached) - ahead + 1 >= self.n_ctx:
                    reason = "context_full"
                    break
                if lookup is not None:
                    lookup.append(tok)
                if chosen:  # an accepted draft token: its KV is already there
                    continue
                try:
                    chosen.extend(self._step(tok, lookup, max_tokens - len(out_tokens), stats, pick))
                except Cancelled:
                    reason = "cancelled"
                    ahead = 0
                    break
            else:
                ahead = len(chosen) - 1
        finally:
            self._cancel = None
            if ahead > 0:
                self._truncate_record(len(self._cached) - ahead)
        text += decoder.decode(b"", final=True) if reason in ("max_tokens", "eog") else ""
        t2 = time.perf_counter()
        return Generation(
            text=text,
            tokens=tuple(out_tokens),
            stop_reason=reason,
            prompt_tokens=len(prompt),
            tokens_evaluated=evaluated,
            tokens_reused=reused,
            prompt_ms=(t1 - t0) * 1000,
            generation_ms=(t2 - t1) * 1000,
            drafts=stats.drafts,
            drafted=stats.drafted,
            accepted=stats.accepted,
            guide="" if guide is None else ("released" if guide.released else "kept"),
        )

    def _lookup(self, prompt: Sequence[int]) -> PromptLookup:
        """The n-gram index drafts come from: the prompt (file, suffix, repository context)."""
        fim = self.fim
        control = {fim.prefix, fim.suffix, fim.middle, fim.pad, fim.repo_name, fim.file_sep}
        return PromptLookup(prompt, exclude={t for t in control if t is not None} | fim.stop)

    def _step(
        self, tok: int, lookup: PromptLookup | None, budget: int, stats: DraftStats, pick: Callable[[], int]
    ) -> list[int]:
        """Decode ``tok`` (with a draft after it when one is worth it); returns the model's next
        tokens: the accepted draft tokens, then the first token of its own choosing (``pick``: the
        argmax, or a guide's choice).

        ``budget`` caps the draft at the tokens the request may still generate, so a fully accepted
        draft never computes more than plain decoding would. Rejected tokens leave the cache at once.

        A batch is computed with other kernels than a single token, so its logits differ by rounding
        (measured on Qwen2.5-Coder-1.5B: the gap between the two best tokens moves by up to ~0.4).
        A choice closer than ``_TIE_MARGIN`` could come out otherwise in plain decoding, so it is
        not taken from the batch: the cell it came from is decoded again alone, as plain decoding
        would, and its choice is used instead.
        """
        pos = len(self._cached)
        draft: list[int] = []
        match_len = 0
        if lookup is not None:
            match_len, draft = lookup.draft(min(budget, self.n_ctx - pos - 2, self.config.n_batch - 1))
            draft = draft[: self.draft_policy.length(match_len, len(draft))]
        if not draft:
            self._decode_at([(pos, tok)])
            return [pick()]
        cells = [(pos, tok)] + [(pos + 1 + i, t) for i, t in enumerate(draft)]
        picks, margins = self._decode_all(cells)
        accepted = 0
        while (
            accepted < len(draft) and picks[accepted] == draft[accepted] and margins[accepted] >= _TIE_MARGIN
        ):
            accepted += 1
        stats.drafts += 1
        stats.drafted += len(draft)
        stats.accepted += accepted
        self.draft_policy.update(match_len, len(draft), accepted)
        if margins[accepted] >= _TIE_MARGIN:
            if accepted < len(draft):
                self._truncate_record(pos + 1 + accepted)
            return picks[: accepted + 1]
        # A near-tie: the token after the accepted ones is chosen by a single-token decode.
        self._truncate_record(pos + accepted)
        self._decode_at([cells[accepted]])
        return [*picks[:accepted], pick()]

    def _decode_all(self, cells: Sequence[tuple[int, int]]) -> tuple[list[int], list[float]]:
        """Evaluate a few (position, token) cells in one batch, with logits for every one; returns
        the argmax after each (the model's greedy choice of the token that follows it) and its lead
        over the runner-up."""
        batch = self._batch
        for i, (pos, tok) in enumerate(cells):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True
        batch.n_tokens = len(cells)
        rc = self._ll.llama_decode(self._ctx, batch)
        if rc != 0:
            self._truncate_record(cells[0][0])
            if rc == 2 or (self._cancel is not None and self._cancel.cancelled):
                raise Cancelled("cancelled during decoding")
            raise EngineError(f"llama_decode failed with code {rc}; see the log (run with -vv)")
        self._cached.extend(tok for _, tok in cells)
        np = self._np
        ptr = self._ll.llama_get_logits(self._ctx)
        logits = np.ctypeslib.as_array(ptr, shape=(len(cells), self.n_vocab))
        rows = np.arange(len(cells))
        best = logits.argmax(axis=1)
        top = logits[rows, best]
        logits[rows, best] = -np.inf  # llama.cpp's buffer: read once, restored below
        second = logits.max(axis=1)
        logits[rows, best] = top
        return [int(t) for t in best], [float(m) for m in top - second]

    def close(self) -> None:
        if (store := getattr(self, "store", None)) is not None:
            store.close()  # states queued for writing reach the disk
            self.store = None
        if getattr(self, "_ctx", None):
            self._ll.llama_batch_free(self._batch)
            self._ll.llama_free(self._ctx)
            self._ll.llama_model_free(self._model)
            self._ctx = None
            self._model = None

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self.close()
