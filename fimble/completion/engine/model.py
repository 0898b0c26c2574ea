"""One GGUF model loaded into one llama.cpp context: weights, vocabulary, FIM tokens, the CPU path.

Everything here is shared by every KV sequence (slot) of the context and changes nothing in the KV
cache: tokenizing, pieces, end-of-generation tokens. The context is created here too, with as many
sequences as the configuration asks for in one unified KV buffer (moving cells between sequences is
then metadata-only), because llama.cpp fixes that number when the context is made.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fimble.completion.engine.config import EngineConfig, default_threads
from fimble.completion.prompt.fim import FimTokens, candidate_texts, detect_fim
from fimble.errors import EngineError, ModelCorrupt
from fimble.models import cpu_path

__all__ = ["Model", "aborting", "install_log_callback", "set_load_mode"]

log = logging.getLogger("fimble.completion.engine")

# ggml_log_level: 0 none, 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_LOG_LEVELS = {3: logging.INFO, 4: logging.WARNING}  # its warnings are mostly model-file trivia
_llama_logger = logging.getLogger("fimble.llama")
# Set while a decode is being aborted on purpose (a newer keystroke): llama.cpp then logs its "failed
# to compute graph / failed to decode, ret = 2" lines as warnings, which are normal here, not news.
aborting = threading.Event()

_log_lock = threading.Lock()
_log_callback: object = None  # the C callback llama.cpp logs through; set once, never freed


def install_log_callback(llama_cpp: Any) -> None:
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
            lvl = logging.DEBUG if aborting.is_set() else _LOG_LEVELS.get(level, logging.DEBUG)
            if _llama_logger.isEnabledFor(lvl):
                _llama_logger.log(lvl, "%s", text.decode("utf-8", "replace").rstrip())

        llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
        _log_callback = _callback


def log_callback() -> object:
    """The installed C log callback (None before the first engine): tests check it is kept."""
    return _log_callback


def set_load_mode(llama_cpp: Any, mparams: Any, use_mmap: bool) -> None:
    """Memory-map the weights or read them in. Newer llama.cpp says it with ``load_mode`` (the old
    ``use_mmap`` field is gone; ctypes would take the assignment silently and change nothing)."""
    fields = {name for name, *_ in type(mparams)._fields_}
    if "load_mode" in fields:
        mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP if use_mmap else llama_cpp.LLAMA_LOAD_MODE_NONE
    elif "use_mmap" in fields:
        mparams.use_mmap = use_mmap


class Model:
    """The weights, the vocabulary and the llama.cpp context holding ``config.n_seq_max`` sequences."""

    def __init__(self, model_path: str | Path, config: EngineConfig) -> None:
        self.config = config
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

        self.ll = llama_cpp
        self.np = np
        install_log_callback(llama_cpp)
        llama_cpp.llama_backend_init()
        started = time.perf_counter()
        mparams = llama_cpp.llama_model_default_params()
        set_load_mode(llama_cpp, mparams, config.use_mmap)
        cpu_path.apply(mparams, self.cpu.path)
        self.model = llama_cpp.llama_model_load_from_file(str(self.model_path).encode(), mparams)
        if not self.model:
            raise ModelCorrupt(
                f"llama.cpp could not load {self.model_path}: the file is not a usable GGUF model. "
                "Run `fimble models verify` and, if it fails, `fimble models pull NAME --force`."
            )
        self.threads = config.threads or default_threads()
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = config.n_ctx
        cparams.n_batch = config.n_batch
        cparams.n_ubatch = config.n_batch
        cparams.n_threads = self.threads
        cparams.n_threads_batch = self.threads
        cparams.no_perf = True
        # Sequence 1 parks moved chunks while the tokens before them are evaluated (``Slot.evaluate``);
        # further sequences are batch slots. One unified KV buffer makes moving cells between sequences
        # metadata-only, and lets every sequence use any of the n_ctx cells.
        cparams.n_seq_max = config.n_seq_max
        cparams.kv_unified = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            llama_cpp.llama_model_free(self.model)
            raise EngineError(
                f"llama.cpp could not create a context of {config.n_ctx} tokens; "
                "lower n_ctx or free memory (`fimble doctor` shows what is available)."
            )
        self.load_ms = (time.perf_counter() - started) * 1000
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.n_ctx = llama_cpp.llama_n_ctx(self.ctx)
        self._piece_buf = ctypes.create_string_buffer(256)
        self.fim = self._detect_fim()

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
        buf = (self.ll.llama_token * n_max)()
        n = self.ll.llama_tokenize(self.vocab, data, len(data), buf, n_max, False, special)
        if n < 0:  # pragma: no cover - n_max always suffices for byte-level BPE
            buf = (self.ll.llama_token * -n)()
            n = self.ll.llama_tokenize(self.vocab, data, len(data), buf, -n, False, special)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        n = self.ll.llama_token_to_piece(self.vocab, token, self._piece_buf, len(self._piece_buf), 0, False)
        if n < 0:  # pragma: no cover - pieces longer than 256 bytes
            buf = ctypes.create_string_buffer(-n)
            n = self.ll.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
            return buf.raw[:n]
        return self._piece_buf.raw[:n]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(self.ll.llama_vocab_is_eog(self.vocab, token))

    def ends(self, token: int) -> bool:
        """Generation stops at this token: end of generation, or one of the FIM family's stops."""
        return token in self.fim.stop or self.is_eog(token)

    def _special_id(self, text: str) -> int | None:
        ids = self.tokenize(text, special=True)
        return ids[0] if len(ids) == 1 else None

    def _detect_fim(self) -> FimTokens:
        vocab = {t: i for t in candidate_texts() if (i := self._special_id(t)) is not None}
        eog = frozenset(i for i in vocab.values() if self.is_eog(i))
        return detect_fim(vocab, eog)

    # -- logits ---------------------------------------------------------------------------------

    def logits(self, row: int = -1) -> Any:
        """The logits of batch row ``row`` of the last decode (a view into llama.cpp's buffer)."""
        ptr = self.ll.llama_get_logits_ith(self.ctx, row)
        return self.np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def top2(self, row: int = -1) -> tuple[int, float]:
        """The greedy choice at batch row ``row`` and its lead over the runner-up, in logits."""
        logits = self.logits(row)
        best = int(logits.argmax())
        top = float(logits[best])
        logits[best] = -self.np.inf  # llama.cpp's buffer: read once, restored below
        second = float(logits.max())
        logits[best] = top
        return best, top - second

    @property
    def kv_bytes_per_cell(self) -> int:
        """Bytes one KV cell (one token of one sequence) takes over all layers, K and V in f16:
        what a batch's width costs in memory (``fimble.batch.width``)."""
        ll, m = self.ll, self.model
        head_dim = ll.llama_model_n_embd(m) // max(1, ll.llama_model_n_head(m))
        return 2 * 2 * ll.llama_model_n_layer(m) * ll.llama_model_n_head_kv(m) * head_dim

    def close(self) -> None:
        if self.ctx:
            self.ll.llama_free(self.ctx)
            self.ll.llama_model_free(self.model)
            self.ctx = None
            self.model = None
