"""Prompt-lookup drafting without a model: the n-gram index and the draft-length policy."""

from __future__ import annotations

import pytest

from fimble.completion.engine.speculative import DraftPolicy, DraftStats, PromptLookup


def test_draft_continues_the_longest_earlier_match() -> None:
    # "1 2 3 4 5" earlier; the history ends with "2 3": the draft is what followed "2 3".
    lookup = PromptLookup([1, 2, 3, 4, 5, 9, 9, 2, 3])
    assert lookup.match() == (2, 3)
    assert lookup.draft(3) == (2, [4, 5, 9])


def test_longer_match_wins_over_a_later_shorter_one() -> None:
    # "7 8" -> 1 early; "8" -> 2 later. The history ends "7 8": the 2-gram's continuation wins.
    lookup = PromptLookup([7, 8, 1, 0, 8, 2, 0, 7, 8])
    n, draft = lookup.draft(1)
    assert (n, draft) == (2, [1])


def test_latest_occurrence_of_the_same_ngram_wins() -> None:
    lookup = PromptLookup([5, 6, 1, 5, 6, 2, 5, 6])
    assert lookup.draft(1) == (2, [2])


def test_no_match_no_draft() -> None:
    lookup = PromptLookup([1, 2, 3])
    lookup.append(42)
    assert lookup.match() == (0, -1)
    assert lookup.draft(4) == (0, [])
    assert PromptLookup([]).draft(4) == (0, [])


def test_the_history_end_itself_is_not_a_match() -> None:
    # A token seen once, at the very end, has no continuation yet.
    assert PromptLookup([1, 2, 3]).draft(2) == (0, [])


def test_generated_tokens_extend_the_index() -> None:
    lookup = PromptLookup([10, 11, 12], max_ngram=2)
    lookup.extend([13, 10, 11])
    assert lookup.draft(4) == (2, [12, 13, 10, 11])
    assert len(lookup) == 6


def test_draft_is_cut_at_excluded_tokens() -> None:
    # 99 stands for a FIM control token: never drafted, nothing after it either.
    lookup = PromptLookup([1, 2, 3, 99, 4, 1, 2], exclude={99})
    assert lookup.draft(5) == (2, [3])


def test_draft_respects_max_len_and_the_end_of_history() -> None:
    lookup = PromptLookup([1, 2, 3, 4, 1, 2])
    assert lookup.draft(0) == (0, [])
    assert lookup.draft(1) == (2, [3])
    assert lookup.draft(10) == (2, [3, 4, 1, 2])


def test_ngram_bounds_are_checked() -> None:
    with pytest.raises(ValueError):
        PromptLookup([], min_ngram=0)
    with pytest.raises(ValueError):
        PromptLookup([], min_ngram=3, max_ngram=2)


def test_min_ngram_ignores_shorter_matches() -> None:
    lookup = PromptLookup([1, 2, 5, 3, 2], min_ngram=2)
    assert lookup.draft(2) == (0, [])


def test_policy_drafts_nothing_without_a_match_or_room() -> None:
    policy = DraftPolicy()
    assert policy.length(0, 8) == 0
    assert policy.length(4, 0) == 0


def test_policy_drafts_longer_after_longer_matches() -> None:
    policy = DraftPolicy()
    lengths = [policy.length(n, 8) for n in (1, 2, 3, 4)]
    assert lengths == sorted(lengths) and lengths[-1] > lengths[0]
    assert policy.length(4, 2) == 2  # never more than the room left


def test_policy_shortens_after_rejections_and_recovers_after_acceptances() -> None:
    policy = DraftPolicy()
    start = policy.length(3, 8)
    for _ in range(10):
        policy.update(3, 4, 0)
    assert policy.length(3, 8) < start
    assert policy.length(3, 8) == 0  # a match length that keeps failing stops drafting ...
    tries = 0
    while policy.length(3, 8) == 0:  # ... for a while: matches not drafted bring the rate back
        tries += 1
    assert 1 < tries < 100
    for _ in range(30):
        policy.update(3, 8, 8)
    assert policy.length(3, 8) == policy.max_draft


def test_policy_update_ignores_empty_drafts() -> None:
    policy = DraftPolicy()
    before = list(policy.rates)
    policy.update(0, 4, 2)
    policy.update(2, 0, 0)
    assert policy.rates == before


def test_stats_acceptance() -> None:
    assert DraftStats().acceptance == 0.0
    assert DraftStats(drafts=2, drafted=8, accepted=6).acceptance == 0.75


def test_bulk_extend_indexes_like_appending_one_by_one() -> None:
    import random

    rng = random.Random(5)
    tokens = [rng.randrange(30) for _ in range(400)]

    def one_by_one() -> PromptLookup:
        lookup = PromptLookup()
        for tok in tokens:
            lookup.append(tok)
        return lookup

    split = PromptLookup(tokens[:150])
    split.extend(tokens[150:])
    for lookup in (PromptLookup(tokens), split):
        reference = one_by_one()
        assert lookup._tables == reference._tables
        for k in (1, 5):
            assert lookup.draft(k) == reference.draft(k)
        lookup.extend([7, 8])
        reference.extend([7, 8])
        assert lookup.match() == reference.match()
