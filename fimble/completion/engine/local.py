"""The local llama.cpp engine: one model, its slots (KV sequences) and one decoder, behind one object.

Built on llama-cpp-python's low-level C API rather than ``Llama.create_completion`` because fimble
needs control the high-level API hides: prompts as token ids with FIM tokens spliced in, a KV cache
whose contents we track token by token (longest common prefix and chunk reuse), greedy decoding that
checks stop rules per token, and cancellation both between tokens and inside a long prompt
evaluation (llama.cpp's abort callback).

Sequences: 0 is the interactive slot every editor request uses (``generate``, ``prepare``, the
snapshot and restore methods all act on it), 1 is where it parks moved chunks, and 2 ..
``n_seq_max - 1`` are batch slots for ``generate_batch``. The engine is not thread-safe: exactly one
thread (``fimble.completion.worker``) owns it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fimble.completion.engine.batch import Feed, OnDone, check_fits, decode_batch
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.config import BatchGeneration, EngineConfig, Generation, StopCheck
from fimble.completion.engine.decoder import Decoder
from fimble.completion.engine.kvstore import KVEntry, KVStore
from fimble.completion.engine.model import Model
from fimble.completion.engine.slot import LlamaMemory, Slot
from fimble.completion.engine.speculative import DraftPolicy
from fimble.errors import Cancelled, EngineError

if TYPE_CHECKING:
    from fimble.completion.engine.guide import Guide

__all__ = ["Engine"]

log = logging.getLogger(__name__)

INTERACTIVE_SEQ = 0
PARKING_SEQ = 1


class Engine:
    """A loaded model with a reusable KV cache.

    ``generate`` evaluates only the prompt tokens that differ from what the KV cache already holds
    (longest common prefix, moved chunks), then decodes greedily until a stop.
    """

    def __init__(self, model_path: str | Path, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self.model = Model(model_path, self.config)
        m = self.model
        self.model_path = m.model_path
        self.cpu = m.cpu
        self.threads = m.threads
        self.load_ms = m.load_ms
        self.n_vocab = m.n_vocab
        self.n_ctx = m.n_ctx
        self.fim = m.fim
        self.kv = LlamaMemory(m.ll, m.ctx)
        cfg = self.config
        self.slots = [
            Slot(
                self.kv,
                seq,
                park=PARKING_SEQ if seq == INTERACTIVE_SEQ else None,
                reuse_min_chunk=cfg.reuse_min_chunk,
                restore_min_gain=cfg.restore_min_gain,
                fim_marks=(m.fim.prefix, m.fim.suffix),
                lines_min_chunk=cfg.lines_min_chunk,
            )
            for seq in range(cfg.n_seq_max)
            if seq != PARKING_SEQ
        ]
        self.slot = self.slots[0]  # the interactive slot
        self.decoder = Decoder(m, cfg)
        self.speculative = cfg.speculative  # per-request override: ``generate(speculative=)``
        self.draft_policy = DraftPolicy()  # learns how long drafts should be, across requests

    # -- what the rest of fimble and its benches read -----------------------------------------------

    @property
    def batch_slots(self) -> list[Slot]:
        """The slots ``generate_batch`` decodes in: every sequence but 0 and its parking one."""
        return self.slots[1:]

    @property
    def store(self) -> KVStore | None:
        """Saved states on disk (``attach_store``); the interactive slot reads and writes them."""
        return self.slot.store

    @store.setter
    def store(self, store: KVStore | None) -> None:
        self.slot.store = store

    @property
    def tokens_shifted(self) -> int:
        """KV cells moved instead of evaluated, since load (for status/bench)."""
        return self.slot.tokens_shifted

    @property
    def tokens_restored(self) -> int:
        """KV cells read back from disk instead of evaluated, since load."""
        return self.slot.tokens_restored

    @property
    def last_restore(self) -> dict[str, float]:
        """Tokens and ms of the last state read back."""
        return self.slot.last_restore

    # llama.cpp handles and the interactive slot's record by their old names, for tests and benches
    # that reach into them (``bench/speculative.py`` thaws a saved state by hand).
    @property
    def _ll(self) -> Any:
        return self.model.ll

    @property
    def _np(self) -> Any:
        return self.model.np

    @property
    def _ctx(self) -> Any:
        return self.model.ctx

    @property
    def _model(self) -> Any:
        return self.model.model

    @property
    def _mem(self) -> Any:
        return self.model.mem

    @property
    def _cached(self) -> list[int]:
        return self.slot.cells

    @_cached.setter
    def _cached(self, tokens: list[int]) -> None:
        self.slot.cells = tokens

    def _truncate_record(self, n: int) -> None:
        self.slot.truncate(n)

    def _decode_all(self, cells: Sequence[tuple[int, int]]) -> tuple[list[int], list[float]]:
        return self.decoder.decode_all(self.slot, cells)

    # -- vocabulary -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Tokenize file text; ``special=False`` so control-token text in a file stays plain text."""
        return self.model.tokenize(text, special=special)

    def piece(self, token: int) -> bytes:
        return self.model.piece(token)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.model.detokenize(tokens)

    def is_eog(self, token: int) -> bool:
        return self.model.is_eog(token)

    # -- the interactive slot's KV cache ------------------------------------------------------------

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        return tuple(self.slot.cells)

    def reset(self) -> None:
        """Forget the KV cache (tests and benchmarks start cold with it)."""
        self.kv.clear()
        for slot in self.slots:
            slot.cells = []

    def prepare(
        self, prompt: Sequence[int], cancel: CancelToken | None = None, reuse_limit: int = 0
    ) -> tuple[int, int]:
        """Make the KV cache hold ``prompt``; returns (tokens reused, tokens evaluated).

        Besides the longest common prefix, runs of at least ``reuse_min_chunk`` tokens within
        ``prompt[:reuse_limit]`` that the cache holds at other positions (a repository chunk after the
        one before it was swapped) are moved into place with a position shift instead of being
        evaluated again. Their KV was computed against the old text before them: an approximation
        llama.cpp's server makes too with ``--cache-reuse``, acceptable for self-contained chunks
        only, hence the limit (0: prefix reuse only). Where ``prompt[reuse_limit]`` is the FIM
        prefix token, longer runs of the file's lines after it may move left too (``Slot.plan``):
        after a jump down a file, the lines both prompts show. The last prompt token is always
        evaluated, because its logits are needed for the first generated token.
        """
        if len(prompt) >= self.n_ctx:
            raise EngineError(f"prompt of {len(prompt)} tokens does not fit the context of {self.n_ctx}")
        self.decoder.cancel = cancel
        try:
            return self.slot.prepare(prompt, self.decoder.decode_at, reuse_limit)
        finally:
            self.decoder.cancel = None

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
        """Greedy completion of ``prompt`` (token ids) in the interactive slot.

        Stops on an end-of-generation token, the FIM family's stop tokens, ``stop`` (checked on the
        decoded text after every token), ``max_tokens``, a full context, or ``cancel`` (checked between
        tokens). ``on_text`` receives the text so far after each token (for streaming).

        With ``speculative`` (default: ``self.speculative``), each decoding step also checks a draft
        of the next tokens looked up in the prompt (``fimble.completion.engine.speculative``) in the same
        batch. Tokens come out of the model one at a time either way and go through the same checks
        in the same order; only the KV cells of tokens a plain decode would not have computed yet are
        dropped at the end, so the output, the stop reasons and the cache are those of plain decoding.

        A ``guide`` (``fimble.completion.engine.guide``) picks each token from the model's best few instead
        of the argmax; while it guides, decoding is plain (no drafts): the lines it guides are short.
        """
        t0 = time.perf_counter()
        try:
            reused, evaluated = self.prepare(prompt, cancel, reuse_limit)
        except Cancelled:
            ms = (time.perf_counter() - t0) * 1000
            return Generation("", (), "cancelled", len(prompt), 0, 0, ms, 0.0)
        t1 = time.perf_counter()
        out = self.decoder.run(
            self.slot,
            prompt,
            max_tokens=max_tokens,
            stop=stop,
            cancel=cancel,
            on_text=on_text,
            speculative=self.speculative if speculative is None else speculative,
            guide=guide,
            policy=self.draft_policy,
        )
        t2 = time.perf_counter()
        return Generation(
            text=out.text,
            tokens=tuple(out.tokens),
            stop_reason=out.reason,
            prompt_tokens=len(prompt),
            tokens_evaluated=evaluated,
            tokens_reused=reused,
            prompt_ms=(t1 - t0) * 1000,
            generation_ms=(t2 - t1) * 1000,
            drafts=out.stats.drafts,
            drafted=out.stats.drafted,
            accepted=out.stats.accepted,
            guide="" if guide is None else ("released" if guide.released else "kept"),
        )

    # -- several prompts at once --------------------------------------------------------------------

    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int = 64,
        stop: StopCheck | None = None,
        cancel: CancelToken | None = None,
        stops: Sequence[StopCheck | None] | None = None,
        on_done: OnDone | None = None,
        limits: Sequence[int] | None = None,
        keep_interactive: bool = False,
        feed: Feed | None = None,
        guides: Sequence[Guide | None] | None = None,
    ) -> list[BatchGeneration]:
        """Greedy completions of ``prompts``, each in a batch slot, decoded together; one
        ``BatchGeneration`` per prompt, in order (see ``fimble.completion.engine.batch``).

        Needs ``n_seq_max`` >= 3. Any number of prompts: at most one per batch slot runs at a time,
        a waiting one taking the slot of the first that stops, and prompts sharing a head (lines of
        one file) evaluate it once. The interactive slot's cache is kept unless the batch needs its
        cells (then it is cleared, and ``cached_tokens`` says so). ``stops``: a stop check per prompt,
        in place of ``stop`` for all; ``limits``: a ``max_tokens`` per prompt, which also budgets its
        KV cells. ``on_done(index, generation)``: each prompt as soon as it stops.
        ``keep_interactive``: run narrower rather than clear the interactive slot's cells (a
        server, whose next keystroke wants them); they go only for a prompt that fits no other way.
        ``feed``: prompts that arrive while it runs (``batch.Feed``; the caller checks that they fit).
        ``guides``: a guide (or None) per prompt, picking its tokens as ``generate``'s ``guide`` does."""
        slots = self.batch_slots
        if not slots:
            raise EngineError(
                f"no batch slots: n_seq_max is {self.config.n_seq_max}; "
                "set it to 3 or more (sequences 0 and 1 serve the editor)"
            )
        check_fits(prompts, self.n_ctx)
        if stops is not None and len(stops) != len(prompts):
            raise ValueError(f"{len(stops)} stop checks for {len(prompts)} prompts")
        if limits is not None and len(limits) != len(prompts):
            raise ValueError(f"{len(limits)} limits for {len(prompts)} prompts")
        if guides is not None and len(guides) != len(prompts):
            raise ValueError(f"{len(guides)} guides for {len(prompts)} prompts")
        return decode_batch(
            self.decoder,
            slots,
            prompts,
            max_tokens=max_tokens,
            stop=stop,
            cancel=cancel,
            stops=stops,
            interactive=self.slot,
            on_done=on_done,
            limits=limits,
            keep_interactive=keep_interactive,
            feed=feed,
            guides=guides,
        )

    # -- KV state on disk ---------------------------------------------------------------------------

    def attach_store(self, store: KVStore | None) -> None:
        """Read states back from ``store`` when a prompt matches one better than the cache does."""
        self.store = store

    def evaluation_cost(self, prompt: Sequence[int], reuse_limit: int = 0) -> int:
        """How many tokens ``prepare(prompt)`` would evaluate, counting a state it would read back."""
        return self.slot.evaluation_cost(prompt, reuse_limit)

    def restore(self, entry: KVEntry) -> bool:
        """Load a saved state into the interactive slot (replacing the cache); False when unusable."""
        return self.slot.restore(entry)

    def snapshot(self, n: int) -> tuple[list[int], memoryview] | None:
        """Copy the KV of the first ``n`` cached tokens out of llama.cpp (None: nothing to copy)."""
        return self.slot.snapshot(n)

    def save_state(
        self, n: int, *, wait: bool = False, slack: int | None = None, file_start: int | None = None
    ) -> bool:
        """Save the first ``n`` cached tokens' KV to the store unless it already holds (nearly) them.

        Only the copy out of llama.cpp happens on this (the engine's) thread; the disk write runs on
        the store's writer thread unless ``wait``. ``file_start``: where the file's own tokens begin
        (``KVStore.save`` replaces older states of the same file with it).
        """
        slack = self.config.restore_min_gain if slack is None else slack
        return self.slot.save_state(n, wait=wait, slack=slack, file_start=file_start)

    def close(self) -> None:
        if (store := getattr(self, "store", None)) is not None:
            store.close()  # states queued for writing reach the disk
            self.store = None
        if getattr(self, "decoder", None) is not None:
            self.decoder.close()
        if getattr(self, "model", None) is not None:
            self.model.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self.close()
