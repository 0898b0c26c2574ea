"""Prompt-lookup drafting: guess the next tokens of a completion from where its recent tokens occurred before.

On a 2-core CPU generating one token costs one pass over the weights (~40 ms at the memory-bandwidth
floor). Checking several guessed tokens in one batch was hoped to cost little more than one pass, but
llama.cpp's small-batch CPU kernels do not amortise it: measured on Qwen2.5-Coder-1.5B Q4_K_M with
1,500 cached tokens (``bench/speculative.py``, idle), a batch of n costs ~42 + ~30 (n - 1) ms, so a
drafted token costs ~0.7 of a step whether or not it is accepted, and even drafts that are always
right cannot be faster than ~1.4x. Code completions copy a lot from their prompt — identifiers,
argument lists, the line that follows a similar line — so the continuation of the last few
generated tokens' earlier occurrence in the prompt is often exactly what the model will generate.
The engine checks such a draft in one batched decode and keeps the tokens the model agrees with
(greedy: identical output).

Everything here is pure and model-free: an n-gram index over token ids, and a policy that decides how
long a draft is worth (no draft without a match; longer drafts while recent drafts were accepted).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

__all__ = ["DraftPolicy", "DraftStats", "PromptLookup"]


class PromptLookup:
    """An n-gram index over the prompt and the tokens generated so far, for drafting continuations.

    For every n in ``[min_ngram, max_ngram]`` it maps each n-gram to the position right after its
    latest occurrence. A draft continues the longest n-gram that ends the history and occurred
    before: longer matches predict better, and the latest occurrence is the most relevant one (the
    generated text, then the lines just above the cursor, then the suffix and other files).
    Tokens in ``exclude`` (FIM control tokens, end of generation) never appear in a draft: the model
    never generates them as part of a completion and a draft through them would be wasted.
    """

    def __init__(
        self,
        tokens: Iterable[int] = (),
        *,
        min_ngram: int = 1,
        max_ngram: int = 4,
        exclude: Collection[int] = (),
    ) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.min_ngram = min_ngram
        self.max_ngram = max_ngram
        self._exclude = frozenset(exclude)
        self._tokens: list[int] = []
        # One table per n: n-gram -> position after its latest occurrence (excluding the history's end).
        self._tables: list[dict[tuple[int, ...], int]] = [{} for _ in range(max_ngram + 1)]
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        """Add many tokens at once (the prompt: ~2 ms for 1,500 tokens, built per request)."""
        toks = self._tokens
        start = len(toks)
        toks.extend(tokens)
        end = len(toks)
        for n in range(self.min_ngram, self.max_ngram + 1):
            lo = max(n, start)  # continuation positions j: the n-gram toks[j-n:j] is new
            if lo >= end:
                continue
            grams = zip(*(toks[lo - n + i : end - n + i] for i in range(n)), strict=True)
            self._tables[n].update(zip(grams, range(lo, end), strict=True))  # later j overwrite earlier

    def append(self, token: int) -> None:
        """Add one token; the n-grams ending just before it now have a continuation (this token)."""
        toks = self._tokens
        end = len(toks)
        for n in range(self.min_ngram, self.max_ngram + 1):
            if end >= n:
                self._tables[n][tuple(toks[end - n : end])] = end
        toks.append(token)

    def match(self) -> tuple[int, int]:
        """(n, start): the longest n-gram ending the history seen before, and where its continuation
        starts; (0, -1) when none."""
        toks = self._tokens
        for n in range(min(self.max_ngram, len(toks)), self.min_ngram - 1, -1):
            start = self._tables[n].get(tuple(toks[len(toks) - n :]))
            if start is not None:
                return n, start
        return 0, -1

    def draft(self, max_len: int) -> tuple[int, list[int]]:
        """(match length, up to ``max_len`` tokens continuing the best match); (0, []) when none."""
        if max_len <= 0:
            return 0, []
        n, start = self.match()
        if n == 0:
            return 0, []
        out: list[int] = []
        for tok in self._tokens[start : start + max_len]:
            if tok in self._exclude:
                break
            out.append(tok)
        return n, out


@dataclass
class DraftStats:
    """Drafts proposed and tokens accepted, per request (reported in ``Generation``)."""

    drafts: int = 0
    drafted: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


@dataclass
class DraftPolicy:
    """How many tokens to draft now, from the match length and how recent drafts fared.

    A drafted token costs ~0.7 of a decoding step (see the module docstring); one that is accepted
    saves a whole step. So a draft is worth it only while the chance that its next token is accepted
    stays above ~0.7. The policy keeps an exponentially weighted acceptance rate of drafted tokens per match
    length (a 1-gram match guesses far worse than a 4-gram one) and drafts ``k`` tokens where the
    chance that all ``k`` are accepted (rate ** k) is still above ``min_chance``. Rates start
    optimistic and are shared across requests (the engine keeps one policy), so a run of poor
    guesses shortens drafts and good ones lengthen them again.
    """

    max_draft: int = 8
    min_chance: float = 0.7  # a draft token costs ~0.7 of a step (batch of n: ~42 + 30 (n-1) ms)
    decay: float = 0.85  # weight of the old rate at each update (about the last 6-7 drafts)
    recover: float = 0.05  # a match not drafted moves its rate this much back toward ``initial``
    # Index = match length. 1- and 2-gram matches start below ``min_chance`` and are not drafted
    # until they earn it: on standard-library completions only ~30% of 1-gram drafts were accepted.
    initial: tuple[float, ...] = (0.0, 0.3, 0.55, 0.75, 0.9)
    rates: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.rates:
            self.rates = list(self.initial)

    def length(self, match_len: int, limit: int) -> int:
        """Tokens worth drafting after a match of ``match_len`` tokens, at most ``limit``."""
        if match_len <= 0 or limit <= 0:
            return 0
        i = min(match_len, len(self.rates) - 1)
        rate = self.rates[i]
        k, chance = 0, 1.0
        while k < min(self.max_draft, limit):
            chance *= rate
            if chance < self.min_chance:
                break
            k += 1
        if k == 0:  # not drafting teaches nothing: drift back so that drafting is tried again later
            self.rates[i] += self.recover * (self.initial[min(i, len(self.initial) - 1)] - rate)
        return k

    def update(self, match_len: int, drafted: int, accepted: int) -> None:
        """Learn from one verified draft: ``accepted`` of its ``drafted`` tokens were right.

        The per-token rate of a draft that accepted ``a`` of ``d`` tokens is estimated as the
        geometric-run estimate a / (a + 1) when it stopped on a rejection, and left unchanged by a
        fully accepted draft only in its upward direction (a / d counts as 1).
        """
        if match_len <= 0 or drafted <= 0:
            return
        i = min(match_len, len(self.rates) - 1)
        observed = 1.0 if accepted >= drafted else accepted / (accepted + 1)
        self.rates[i] = self.decay * self.rates[i] + (1 - self.decay) * observed
