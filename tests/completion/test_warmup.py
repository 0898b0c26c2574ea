"""The warmer without a model: prompt choice against the budget, warm-up steps, saves, cancellation."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from fimble.completion import warmup
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.engine.kvstore import KVStore
from fimble.completion.prompt.fim import FimPrompt, PromptPart
from fimble.completion.warmup import Warmer, WarmupConfig, first_budgets
from fimble.errors import Cancelled


@pytest.fixture(autouse=True)
def config() -> Iterator[None]:
    warmup.configure(WarmupConfig(first_ms=1600, kv_state_mb=64))
    yield
    warmup.configure(WarmupConfig())


class FakeStore:
    max_bytes = 0

    def match(self, _prompt: Sequence[int]) -> None:
        return None


class FakeEngine:
    """Tracks cached tokens like the engine: prepare keeps the common prefix and evaluates the rest."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.cached: list[int] = []
        self.store = FakeStore()
        self.saved: list[int] = []
        self.cancel_after = cancel_after  # raise Cancelled on this prepare call
        self.calls = 0

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        return tuple(self.cached)

    def _common(self, prompt: Sequence[int]) -> int:
        n = 0
        while n < min(len(self.cached), len(prompt)) and self.cached[n] == prompt[n]:
            n += 1
        return n

    def evaluation_cost(self, prompt: Sequence[int], reuse_limit: int = 0) -> int:
        return len(prompt) - self._common(prompt)

    def prepare(self, prompt: Sequence[int], cancel: CancelToken | None = None, reuse_limit: int = 0):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.cancel_after is not None and self.calls >= self.cancel_after:
            raise Cancelled("keystroke")
        n = self._common(prompt)
        self.cached = list(prompt)
        return n, len(prompt) - n

    def save_state(
        self, n: int, *, wait: bool = False, slack: int | None = None, file_start: int | None = None
    ) -> bool:
        self.saved.append(n)
        return True

    def restore(self, _entry: object) -> bool:
        return False

    def tokenize(self, _text: str) -> list[int]:
        return []  # too short to time: the start-up measurement is skipped


def _prompt(context: int, prefix: int, suffix: int, base: int = 0) -> FimPrompt:
    ids = iter(range(base, base + context + prefix + suffix + 10))
    return FimPrompt(
        (
            PromptPart("context", tuple(next(ids) for _ in range(context))),
            PromptPart("prefix", tuple(next(ids) for _ in range(prefix))),
            PromptPart("suffix", tuple(next(ids) for _ in range(suffix))),
            PromptPart("middle", (next(ids),)),
        )
    )


def test_a_cheap_prompt_is_used_as_is() -> None:
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(10, 30, 10)
    assert warmer.choose(engine, full, lambda p, s, c: pytest.fail("no small prompt needed")) is full  # type: ignore[arg-type]
    assert warmer.pending  # the head is saved when idle


def test_a_cold_large_prompt_gets_a_first_prompt_and_warms_up_when_idle() -> None:
    """The first prompt is the local window at ``first_tokens`` (384): the suffix's whole budget
    (up to a third), the prefix the rest, no room left for repository context."""
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(400, 1200, 64)
    budgets: list[tuple[int, int, int]] = []
    small = _prompt(0, 60, 20, base=10_000)

    def rebuild(prefix_budget: int, suffix_budget: int, context_budget: int) -> FimPrompt:
        budgets.append((prefix_budget, suffix_budget, context_budget))
        return small

    given = {"prefix_budget": 768, "suffix_budget": 128, "context_budget": 256}
    chosen = warmer.choose(engine, full, rebuild, **given)  # type: ignore[arg-type]
    assert chosen is small and warmer.first_prompts == 1
    assert budgets[-1] == (256, 128, 0)
    engine.cached = list(small.tokens)  # the small prompt was answered
    steps = 0
    while warmer.idle(engine, CancelToken()):  # type: ignore[arg-type]
        steps += 1
        assert steps < 100
    assert engine.cached_tokens == tuple(full.tokens)
    assert steps >= len(full.tokens) // 128
    head = 400 + 1200
    assert engine.saved == [60, head]  # the small prompt's head, then context and prefix, not the suffix
    assert not warmer.pending
    # warm now: the next request in this place uses the full prompt
    assert warmer.choose(engine, full, rebuild) is full  # type: ignore[arg-type]


def test_an_invoked_request_gets_the_full_prompt_however_cold() -> None:
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(400, 1200, 64)
    small = _prompt(0, 60, 20, base=10_000)
    assert warmer.choose(engine, full, lambda p, s, c: small) is small  # type: ignore[arg-type]
    assert warmer.last_small
    chosen = warmer.choose(engine, full, lambda p, s, c: pytest.fail("no small prompt"), small_ok=False)  # type: ignore[arg-type]
    assert chosen is full and not warmer.last_small and not warmer._target


def test_a_keystroke_stops_the_warm_up_and_its_progress_is_saved() -> None:
    engine, warmer = FakeEngine(cancel_after=4), Warmer()
    full = _prompt(400, 1200, 64)
    warmer.choose(engine, full, lambda p, s, c: _prompt(0, 50, 10, base=10_000))  # type: ignore[arg-type]
    assert warmer.idle(engine, CancelToken())  # type: ignore[arg-type]  # the start-up speed measurement
    assert warmer.idle(engine, CancelToken())  # type: ignore[arg-type]
    assert warmer.idle(engine, CancelToken())  # type: ignore[arg-type]
    assert warmer.idle(engine, CancelToken())  # type: ignore[arg-type]
    assert not warmer.idle(engine, CancelToken())  # type: ignore[arg-type]  # cancelled
    assert engine.saved == [3 * 128]
    assert warmer.pending  # resumed at the next idle time


def test_first_ms_zero_always_uses_the_full_prompt() -> None:
    warmup.configure(WarmupConfig(first_ms=0))
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(400, 1200, 64)
    assert warmer.choose(engine, full, lambda p, s, c: pytest.fail("off")) is full  # type: ignore[arg-type]


def test_a_small_prompt_is_not_used_when_it_spares_little() -> None:
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(0, 400, 40)  # cold, but barely over the first prompt's 384 tokens
    small = _prompt(0, 360, 30, base=10_000)  # cold too: would cost nearly as much
    assert warmer.choose(engine, full, lambda p, s, c: small) is full  # type: ignore[arg-type]
    assert warmer.first_prompts == 0


def test_a_cold_prompt_takes_the_prefix_start_the_cache_holds() -> None:
    """Back a few lines from where the file was warmed: the default budget starts the prefix one
    anchor step later than the warmed prompt did; a larger budget starts it where the cache has it."""
    engine, warmer = FakeEngine(), Warmer()
    warmed = _prompt(400, 1200, 64)
    engine.cached = list(warmed.tokens)
    default = _prompt(400, 1100, 64, base=50_000)  # shares nothing: another start line
    seen: list[tuple[int, int]] = []

    def rebuild(prefix_budget: int, suffix_budget: int, context_budget: int) -> FimPrompt:
        seen.append((prefix_budget, context_budget))
        return warmed if prefix_budget > 1536 else _prompt(0, 60, 20, base=90_000)

    budgets = {"prefix_budget": 1536, "suffix_budget": 64, "context_budget": 256, "key": "a.py"}
    chosen = warmer.choose(engine, default, rebuild, **budgets)  # type: ignore[arg-type]
    assert chosen is warmed and warmer.first_prompts == 0
    assert seen[0] == (int(1536 * 1.15), 256)  # the full prompt's budgets, context included
    # the factor that matched is tried first next time
    seen.clear()
    warmer.choose(engine, default, rebuild, **budgets)  # type: ignore[arg-type]
    assert seen[0] == (int(1536 * 1.15), 256)


def test_a_shorter_cold_prompt_is_not_taken_for_a_warm_one() -> None:
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(400, 1200, 64)

    def rebuild(prefix_budget: int, suffix_budget: int, context_budget: int) -> FimPrompt:
        if prefix_budget > 600:  # the full prompt with another prefix budget (``_aligned``)
            return _prompt(400, prefix_budget // 2, 64, base=70_000)
        return _prompt(0, 60, 20, base=90_000)  # the first prompt

    warmer.choose(engine, full, rebuild, prefix_budget=1536, suffix_budget=64, key="b.py")  # type: ignore[arg-type]
    assert warmer.pending and warmer._target is not None
    assert warmer._target.tokens == full.tokens  # the full prompt is what gets warmed, not a shorter one


def _small(path: int, lines: Sequence[int], suffix: int, line: int, base: int = 80_000) -> FimPrompt:
    """A small prompt: path, prefix lines starting at file line ``line`` (one token a line), suffix."""
    return FimPrompt(
        (
            PromptPart("path", tuple(range(base, base + path))),
            PromptPart("prefix", (5, *lines)),
            PromptPart("suffix", tuple(range(base + 500, base + 500 + suffix))),
            PromptPart("middle", (6,)),
        ),
        line,
    )


def test_the_next_line_starts_where_the_last_small_prompt_did_when_that_is_cheaper() -> None:
    """Back a line further down: the default small prompt starts a line later and shares nothing;
    the one starting at the remembered line extends the head the cache (or store) holds."""
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(400, 1200, 64)
    file_lines = list(range(1000, 1200))  # token i+1000 is file line i
    asked: list[int | None] = []

    def rebuild_at(cursor: int):  # type: ignore[no-untyped-def]
        def rebuild(
            prefix_budget: int, suffix_budget: int, context_budget: int, start: int | None = None
        ) -> FimPrompt:
            if start is None and prefix_budget > 600:  # the full prompt with other budgets: as cold
                return full
            asked.append(start)
            first = cursor - 60 if start is None else start
            return _small(8, file_lines[first:cursor], suffix_budget, first)

        return rebuild

    first = warmer.choose(engine, full, rebuild_at(100), prefix_budget=1536, key="a.py")  # type: ignore[arg-type]
    assert first.prefix_line == 40 and asked == [None]
    engine.cached = list(first.tokens)  # answered
    asked.clear()
    again = warmer.choose(engine, full, rebuild_at(102), prefix_budget=1536, key="a.py")  # type: ignore[arg-type]
    assert asked == [None, 40] and again.prefix_line == 40
    assert engine.evaluation_cost(again.tokens) < 40  # two new lines, suffix and middle
    assert engine.saved == []  # the same place: nothing to save
    asked.clear()
    other = warmer.choose(engine, full, rebuild_at(102), prefix_budget=1536, key="b.py")  # type: ignore[arg-type]
    assert asked == [None] and other.prefix_line == 42  # another file: no remembered start


def test_leaving_a_small_prompt_saves_its_head_once() -> None:
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(400, 1200, 64)
    a = _small(8, range(1000, 1060), 32, 40)
    warmer.choose(engine, full, lambda p, s, c, start=None: a, key="a.py")  # type: ignore[arg-type]
    engine.cached = list(a.tokens)
    # Another file's request, before any idle time: the head of a.py's small prompt is saved now.
    b = _small(8, range(3000, 3060), 32, 40, base=90_000)
    warmer.choose(engine, _prompt(400, 1200, 64, base=50_000), lambda p, s, c, start=None: b, key="b.py")  # type: ignore[arg-type]
    assert engine.saved == [8 + 61]  # path, the prefix token and 60 lines; not the suffix
    engine.cached = list(b.tokens)
    warmer.idle(engine, CancelToken())  # type: ignore[arg-type]  # the speed measurement
    warmer.idle(engine, CancelToken())  # type: ignore[arg-type]  # warming b.py's full prompt: b's head first
    assert engine.saved == [69, 69]
    warmer.idle(engine, CancelToken())  # type: ignore[arg-type]
    assert engine.saved == [69, 69]  # once


def test_a_small_head_does_not_replace_a_full_head_of_its_file(tmp_path: Path) -> None:
    """``file_start`` of a small head is its path's end: an older head of the same place is
    replaced; a full head of the file (repository context first) is not, and a head the small one
    is a prefix of already covers it."""
    store = KVStore(tmp_path)
    repo, path = [1, 2, 3], list(range(100, 110))
    full = repo + list(range(2000, 3000)) + path + [5, *range(1000, 1100)]  # context, path, 100 lines
    store.save(full, b"f" * 64, file_start=len(full) - 101)
    small_start = len(repo) + len(path)
    small = repo + path + [5, *range(1060, 1100)]  # the last 40 lines
    store.save(small, b"s" * 64, file_start=small_start)
    assert len(store.entries()) == 2
    edited = [*small[:-1], 7777]  # the same place, the cursor's line edited
    store.save(edited, b"e" * 64, file_start=small_start)
    assert sorted(e.n_tokens for e in store.entries()) == [len(edited), len(full)]
    # No context: the full head starts with the path too; a small head starting at the same line
    # and ending above it is covered (``Engine.save_state`` then saves nothing).
    plain = repo + path + [5, *range(1000, 1100)]
    store.save(plain, b"p" * 64, file_start=small_start)
    assert store.covered(plain[:60], slack=16)
    assert len(store.entries()) == 3


def test_a_small_head_chosen_but_never_evaluated_saves_what_the_cache_holds() -> None:
    """A prefetch for the next line extends the head, then is cancelled before its prompt is
    evaluated: the cache holds the part it shared with the answered prompt, and that is saved."""
    engine, warmer = FakeEngine(), Warmer()
    full = _prompt(400, 1200, 64)
    a = _small(8, range(1000, 1060), 32, 40)
    warmer.choose(engine, full, lambda p, s, c, start=None: a, key="a.py")  # type: ignore[arg-type]
    engine.cached = list(a.tokens)
    ahead = _small(8, [*range(1000, 1059), 4242, 4243], 32, 40)  # the last line typed on
    warmer.choose(engine, full, lambda p, s, c, start=None: ahead, key="a.py")  # type: ignore[arg-type]
    assert engine.saved == []  # the same place
    b = _small(8, range(3000, 3060), 32, 40, base=90_000)
    warmer.choose(engine, _prompt(400, 1200, 64, base=50_000), lambda p, s, c, start=None: b, key="b.py")  # type: ignore[arg-type]
    assert engine.saved == [8 + 1 + 59]  # path, prefix token, the 59 lines both share


def test_a_first_prompt_is_the_local_window_with_context_only_in_what_is_left() -> None:
    assert first_budgets(384, 768, 128, 256) == (256, 128, 0)
    assert first_budgets(384, 768, 512, 256) == (256, 128, 0)  # the lines below: a third at most
    assert first_budgets(384, 128, 32, 1024) == (128, 32, 224)  # a short prefix leaves room for context
    assert first_budgets(2048, 768, 128, 256) == (768, 128, 256)  # the full prompt fits as it is
    assert first_budgets(40, 768, 128, 256) == (27, 13, 0)
