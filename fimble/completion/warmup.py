"""A good first suggestion in a cold region, the full prompt evaluated while the user is idle.

A full prompt (~1,000 tokens) costs ~9 s to evaluate on a 2-core CPU the first time the cursor lands
in a region the KV cache does not hold. So when a request would evaluate more than the first
prompt's budget, the ``Warmer`` answers it from a first prompt: the local window around the cursor
(the lines below it, then above; repository context only if room is left, ``first_budgets``) in at
least ``first_tokens`` tokens, more where the measured speed reads more within ``first_ms``, and
remembers the full prompt. The floor is there for quality: a prompt sized to a latency target alone
was ~60-120 tokens on 2 cores, and its answers were right at 9% of cold line starts (beside 44% for
llama-server reading its whole window). On 160 lines of three projects
(``bench/results/first_prompt.json``) 160 tokens matched 39%, 310-450 tokens 45%, the full ~890
tokens 54%: 384 is the knee. When the engine worker has nothing to do it evaluates the full prompt
with no generation (llama.vim's ``n_predict: 0`` warm-up), in steps of ``_STEP`` tokens so that a
keystroke stops it within one step; progress is saved to the KV state store before the keystroke's
first prompt overwrites the cache, and read back when warming resumes. Once warm, requests use the
full prompt again, at a few tokens each.

Idle time is also when the stable head of the last full prompt (context + file prefix) is saved to
the store, so that coming back to the file, or restarting the server, reads it back.

A first prompt's head (path and the lines above the cursor) is kept too: saved when the
engine leaves it, for the warm-up or another file, and its start line is remembered per file (beside
the states on disk, ``starts.py``, so also after a restart). Back in the file a few lines further
down, the first prompt starts at that line again, so the saved head is read back and only the new
lines, the suffix and the middle are evaluated, not the whole first prompt.

Past 400 lines because choosing, warming and saving share one state (what the cache holds, what
is owed to the store); ``attach_warmup`` at the end is how a worker gets its warmer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.speed import SpeedMeter
from fimble.completion.prompt.fim import PREFIX_TOKENS, FimPrompt
from fimble.completion.starts import StartLines
from fimble.errors import Cancelled

if TYPE_CHECKING:
    from fimble.completion.engine import Engine, Generation

__all__ = ["Warmer", "WarmupConfig", "attach_warmup", "configure", "current_config", "describe"]

log = logging.getLogger(__name__)

_STEP = 128  # tokens evaluated per warm-up step: a keystroke waits at most about this long (~1.3 s)
_MEASURE_TOKENS = 96  # prompt tokens of the start-up speed measurement
_SAVE_SLACK = 64  # a head differing from a saved one in fewer trailing tokens is not saved again
_SMALL_GAIN = 64  # a small prompt must spare at least this many evaluations over the full one
_SMALL_SLACK = 16  # a small head differing from a saved one in fewer trailing tokens is not saved again
_FACTORS = (1.0, 1.15, 1.3, 0.85, 0.7)  # prefix budgets tried for a cold full prompt (see ``choose``)


@dataclass(frozen=True)
class WarmupConfig:
    """``first_ms``: latency target for a suggestion in a cold region (0: always the full prompt);
    ``first_tokens``: the least a cold region's first prompt evaluates, however slow the machine
    (a full prompt costing no more is used as it is); ``kv_state_mb``: bound of the KV state store
    on disk (0: states are not kept)."""

    first_ms: int = 1600
    first_tokens: int = 384
    kv_state_mb: int = 1024
    expected_tokens: int = 16  # generated tokens a first suggestion is planned for


_config = WarmupConfig()
_config_lock = threading.Lock()


def configure(config: WarmupConfig) -> None:
    """Set the process-wide warm-up settings (the server applies the client's settings here)."""
    global _config
    with _config_lock:
        _config = config


def current_config() -> WarmupConfig:
    with _config_lock:
        return _config


@dataclass
class _Target:
    tokens: list[int]
    reuse_limit: int
    head: int  # tokens worth saving: context and file prefix, not suffix and middle


def _head_len(prompt: FimPrompt) -> int:
    n = 0
    for part in prompt.parts:
        n += len(part.tokens)
        if part.kind == "prefix":
            return n
    return prompt.stable_len


class Rebuild(Protocol):
    """The request's prompt with other budgets (``context_budget`` 0: no repository context), and
    with its prefix starting at a given file line when those lines fit (``build_prompt``'s
    ``prefix_start``)."""

    def __call__(
        self, prefix_budget: int, suffix_budget: int, context_budget: int, start: int | None = None, /
    ) -> FimPrompt: ...


def first_budgets(total: int, prefix: int, suffix: int, context: int) -> tuple[int, int, int]:
    """Prefix, suffix and context budgets of a first prompt of about ``total`` tokens: the local
    window first (the lines below the cursor, up to a third of it, then the lines above), repository
    context only with what is left. The lines below tell a line start what it must lead to; context
    squeezed into ~85 tokens did not help. On 130 lines of three projects
    (``bench/results/first_prompt_layout.json``) this layout (256 / 128 / 0) matched 65 where the
    full prompt's layout scaled down (256 / 42 / 85) matched 58, cross-file lines 33 against 30.
    Nor did 128 tokens of context on top, similar code cut to its spot first, as served: the
    ceiling matched 68 against 65, but served at 2 s think time rxjs lost 7 cross-file lines and
    won none (48 of 98 against 54; ``bench/results/similar_aligned.json``)."""
    if prefix + suffix + context <= total:
        return prefix, suffix, context
    below = min(suffix, total // 3)
    above = max(16, min(prefix, total - below))
    return above, below, max(0, min(context, total - below - above))


class Warmer:
    """Per engine worker: which prompt to answer from now, and what to do with idle time."""

    def __init__(self) -> None:
        self.speed = SpeedMeter()
        self._target: _Target | None = None  # the full prompt to evaluate when idle
        self._head: list[int] = []  # the stable head of the last full prompt, to save when idle
        self._head_start = 0  # where the file's own tokens begin in it (after context and path)
        self._measured = False  # the start-up speed measurement ran (first idle step)
        self._factors: dict[str, float] = {}  # per file: the prefix budget factor that matched last
        self._small: list[int] = []  # the last small prompt's head, saved before the cache drops it
        self._small_start = 0  # where the file's own tokens begin in it (after the path)
        self._starts = StartLines()  # per file: the line the last small prompt's prefix began at
        self.first_prompts = 0  # requests answered from a small prompt (for status and benchmarks)
        # Whether the last ``choose`` gave a small prompt: its answer lacks the full prompt's context,
        # so it is shown but not remembered as the answer at that place (the completion cache).
        self.last_small = False
        self.warmed_tokens = 0  # tokens evaluated while idle

    def choose(
        self,
        engine: Engine,
        full: FimPrompt,
        rebuild: Rebuild,
        *,
        prefix_budget: int = 0,
        suffix_budget: int = 0,
        context_budget: int = 0,
        key: str | None = None,
        small_ok: bool = True,
        first: tuple[int, int] | None = None,
    ) -> FimPrompt:
        """``full`` when the cache (or a saved state) makes it cheap enough, else a first prompt of
        ``first_tokens`` or more (``first_budgets``; more when the measured speed reads more within
        ``first_ms``), with ``full`` left to warm up when the user is idle.
        ``small_ok=False`` (an invoked request) always gives ``full``, aligned with what is held.

        The prefix of a full prompt starts at a line that moves in steps of 16 as the cursor moves,
        so coming back to a file a few lines away from where it was warmed can start the prefix one
        step off and share nothing with the saved state. So a cold full prompt is also tried with a
        prefix budget up to 30% larger or smaller (given ``prefix_budget``): the start that the cache
        or a saved state already holds wins. The factor that won is tried first next time (per ``key``).
        """
        self.last_small = False
        config = current_config()
        if first is not None:  # the requesting client's (first_ms, first_tokens): ``Tuning``
            config = replace(config, first_ms=first[0], first_tokens=first[1])
        if config.first_ms <= 0:
            self._target = None
            self._head, self._head_start = full.tokens[: _head_len(full)], full.stable_len
            return full
        budget = max(config.first_tokens, self.speed.prompt_budget(config.first_ms, config.expected_tokens))
        threshold = budget
        cost = engine.evaluation_cost(full.tokens, full.stable_len)
        if cost > threshold and prefix_budget > 0:
            full, cost = self._aligned(
                engine, full, cost, rebuild, prefix_budget, suffix_budget, context_budget, key, threshold
            )
        tokens = full.tokens
        head = _head_len(full)
        self._head, self._head_start = tokens[:head], full.stable_len
        if cost <= threshold or not small_ok:
            self._target = None
            self._leave_small(engine, full)
            return full
        budgets = first_budgets(budget, prefix_budget or PREFIX_TOKENS, suffix_budget, context_budget)
        small, small_cost = self._small_prompt(engine, rebuild, budgets, prefix_budget, key)
        if small_cost + _SMALL_GAIN >= cost:
            self._target = None  # nearly warm (a few new lines): the small prompt would spare little
            self._leave_small(engine, full)
            return full
        self._target = _Target(tokens, full.stable_len, head)
        self.first_prompts += 1
        self.last_small = True
        self._leave_small(engine, small)
        self._small, self._small_start = small.tokens[: _head_len(small)], small.stable_len
        if key is not None:
            self._starts.put(key, small.prefix_line)
        return small

    def _small_prompt(
        self,
        engine: Engine,
        rebuild: Rebuild,
        budgets: tuple[int, int, int],
        prefix_budget: int,
        key: str | None,
    ) -> tuple[FimPrompt, int]:
        """The first prompt with ``budgets`` (prefix, suffix, context), or the one starting where the
        file's last first prompt did, when that costs less (its head is in the cache or the store);
        and its cost.

        A few lines above the cursor make anchor steps of one line (``fim._keep_tail_lines``), so a
        small prompt on the next line shares no token prefix with the last one: starting at the
        same line instead, the prompt is longer, but its head is read back rather than evaluated.
        """
        budget, suffix, context = budgets
        small = rebuild(budget, suffix, context)
        cost = engine.evaluation_cost(small.tokens, small.stable_len)
        self._starts.attach(getattr(engine.store, "root", None) if _keeps_states(engine) else None)
        start = self._starts.get(key) if key is not None else None
        if start is None or start == small.prefix_line:
            return small, cost
        kept = rebuild(max(budget, prefix_budget or PREFIX_TOKENS), suffix, context, start)
        if kept.prefix_line != start:  # the lines from there no longer fit
            return small, cost
        kept_cost = engine.evaluation_cost(kept.tokens, kept.stable_len)
        return (kept, kept_cost) if kept_cost < cost else (small, cost)

    def _leave_small(self, engine: Engine, prompt: FimPrompt) -> None:
        """Before ``prompt`` overwrites the cache: save the last small prompt's head unless
        ``prompt`` goes on from it (the next keystroke in the same place)."""
        head = self._small
        if head and _common(prompt.tokens, head) < len(head) - _SMALL_SLACK:
            self._save_small(engine, wait=False)

    def _save_small(self, engine: Engine, *, wait: bool) -> None:
        """Save what the cache holds of the last small prompt's head (once: it is then forgotten).

        Not always all of it: a prompt that was chosen but cancelled before it was evaluated (a
        prefetch for the next line) leaves the cache holding the part it shares with the one before.
        ``file_start`` is where its file text begins (after the path): an older head of the same
        place is replaced, while a full prompt's head (repository context first) shares too little
        with it to be, and a head it is a prefix of makes it ``covered`` (not saved)."""
        head, self._small = self._small, []
        if not _keeps_states(engine):
            return
        held = _common(engine.cached_tokens, head)
        if held > self._small_start + _SMALL_SLACK:  # some of the file's lines, not just the path
            engine.save_state(held, wait=wait, slack=_SMALL_SLACK, file_start=self._small_start)

    def _aligned(
        self,
        engine: Engine,
        full: FimPrompt,
        cost: int,
        rebuild: Rebuild,
        prefix_budget: int,
        suffix_budget: int,
        context_budget: int,
        key: str | None,
        threshold: int,
    ) -> tuple[FimPrompt, int]:
        """The full prompt, with the prefix budget among ``_FACTORS`` that evaluates the least."""
        last = self._factors.get(key or "", 1.0)
        order = [last] + [f for f in _FACTORS if f != last]
        # Judged by tokens reused, not by cost: a shorter prompt is cheaper but no warmer.
        best, best_cost, best_factor = full, cost, 1.0
        best_reused = len(full) - cost
        for factor in order:
            if factor == 1.0:
                continue
            alt = rebuild(int(prefix_budget * factor), suffix_budget, context_budget)
            alt_cost = engine.evaluation_cost(alt.tokens, alt.stable_len)
            if len(alt) - alt_cost >= best_reused + _SMALL_GAIN:
                best, best_cost, best_factor, best_reused = alt, alt_cost, factor, len(alt) - alt_cost
            if best_cost <= threshold:
                break
        self._factors[key or ""] = best_factor
        return best, best_cost

    @property
    def pending(self) -> bool:
        """Whether idle work is left: a prompt to warm up or a head to save."""
        return self._target is not None or bool(self._head)

    def measure(self, engine: Engine, cancel: CancelToken) -> None:
        """Time a short prompt and generation once, right after the model loads, so that the first
        request's prompt is sized for this machine (a cancelled measurement is simply not counted)."""
        if engine.cached_tokens:  # a request came first: its timings tell, and its cache stays
            return
        text = Path(__file__).read_text(encoding="utf-8")
        tokens = engine.tokenize(text)[:_MEASURE_TOKENS]
        if len(tokens) < _MEASURE_TOKENS:
            return
        gen = engine.generate(tokens, max_tokens=8, cancel=cancel)
        if gen.stop_reason != "cancelled":
            self.observe(gen)
            log.info(
                "speed: %.0f prompt tokens/s, %.0f ms per generated token",
                self.speed.prompt_tps,
                self.speed.ms_per_token,
            )
        engine.reset()

    def observe(self, generation: Generation) -> None:
        self.speed.observe(
            generation.tokens_evaluated,
            generation.prompt_ms,
            len(generation.tokens),
            generation.generation_ms,
        )

    def idle(self, engine: Engine, cancel: CancelToken) -> bool:
        """One step of background work; True when there may be more. Runs on the engine's thread."""
        config = current_config()
        _apply_store_setting(engine, config)
        if not self._measured:
            self._measured = True
            self.measure(engine, cancel)
            return True
        if self._target is not None:
            return self._warm_step(engine, self._target, cancel)
        if _keeps_states(engine) and self._head:
            head = self._head
            if _starts_with(engine.cached_tokens, head):
                engine.save_state(len(head), slack=_SAVE_SLACK, file_start=self._head_start)
            self._head = []  # only now: ``pending`` stays true until the write is queued
        return False

    def _warm_step(self, engine: Engine, target: _Target, cancel: CancelToken) -> bool:
        if self._small:
            # Warming overwrites the small prompt's cache: keep its head first, written before the
            # next keystroke looks for it (a few MB, a few ms).
            self._save_small(engine, wait=True)
        done = _common(engine.cached_tokens, target.tokens)
        store = engine.store
        hit = store.match(target.tokens) if store is not None else None
        # Progress saved before a keystroke interrupted warming: read it back first.
        if hit is not None and hit[1] > done + 32 and engine.restore(hit[0]):
            done = _common(engine.cached_tokens, target.tokens)
        if done >= len(target.tokens) - 1:
            self._target = None
            self._head, self._head_start = target.tokens[: target.head], target.reuse_limit
            return True  # next: save the head
        end = min(len(target.tokens), max(done, 0) + _STEP)
        if engine.evaluation_cost(target.tokens, target.reuse_limit) < len(target.tokens) - done - _STEP:
            # The cache holds runs of the target further on (lines the last prompt showed too):
            # a step would drop them before they are moved into place, so go in one (cancellable) go.
            end = len(target.tokens)
        # Through the middle token (the last) in one go, so the next request's logits come from it.
        if len(target.tokens) - end < 8:
            end = len(target.tokens)
        try:
            _, evaluated = engine.prepare(target.tokens[:end], cancel, target.reuse_limit)
            self.warmed_tokens += evaluated
        except Cancelled:
            # A keystroke is waiting and will overwrite the cache: keep what was evaluated.
            if _keeps_states(engine):
                engine.save_state(min(target.head, len(engine.cached_tokens)), file_start=target.reuse_limit)
            return False
        if cancel.cancelled:
            if _keeps_states(engine):
                engine.save_state(min(target.head, end), file_start=target.reuse_limit)
            return False
        return True


def describe(engine: object, warmer: Warmer | None) -> dict[str, object]:
    """The KV state store of ``engine`` and the numbers of its worker's ``warmer`` for
    `fimble.status` (empty: none)."""
    out: dict[str, object] = {}
    store = getattr(engine, "store", None)
    if store is not None:
        out.update(
            kv_state_dir=str(store.root),
            kv_states=len(store.entries()),
            kv_state_bytes=store.total_bytes,
            kv_state_write_errors=store.errors,
        )
    if warmer is not None:
        out.update(
            tokens_restored=getattr(engine, "tokens_restored", 0),
            last_restore=getattr(engine, "last_restore", {}),
            small_first_prompts=warmer.first_prompts,
            tokens_warmed=warmer.warmed_tokens,
            warming=warmer.pending,
            prompt_tokens_per_s=round(warmer.speed.prompt_tps, 1),
            ms_per_generated_token=round(warmer.speed.ms_per_token, 1),
        )
    return out


def _keeps_states(engine: Engine) -> bool:
    """Whether KV states are saved: a store attached and ``kvStateMb`` not 0."""
    return engine.store is not None and current_config().kv_state_mb > 0


def _apply_store_setting(engine: Engine, config: WarmupConfig) -> None:
    """Follow a changed ``kvStateMb``: a new bound, a store opened, or states no longer read."""
    if config.kv_state_mb <= 0:
        if engine.store is not None:
            engine.attach_store(None)
        return
    if engine.store is None:
        from fimble.completion.engine.kvstore import KVStore, state_dir

        engine.attach_store(KVStore(state_dir(engine.model_path), config.kv_state_mb << 20))
    else:
        engine.store.max_bytes = config.kv_state_mb << 20


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _starts_with(tokens: Sequence[int], head: Sequence[int]) -> bool:
    return len(tokens) >= len(head) and list(tokens[: len(head)]) == list(head)


def attach_warmup(engine: Engine) -> Warmer:
    """Give ``engine`` its KV state store on disk, as the settings here say, and return the warmer
    (small first prompts, idle warm-up) for the worker that owns it (``EngineWorker(warmup=...)``)."""
    from fimble.completion.engine.kvstore import KVStore, state_dir

    config = current_config()
    if config.kv_state_mb > 0:
        engine.attach_store(KVStore(state_dir(engine.model_path), config.kv_state_mb << 20))
    return Warmer()
