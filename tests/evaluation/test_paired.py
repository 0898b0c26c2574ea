"""Paired context effect: won/lost lines, the sign test and the bootstrap interval."""

from __future__ import annotations

from fimble.evaluation.paired import paired_effect, sign_test


def test_sign_test_is_exact_and_two_sided() -> None:
    assert sign_test(0, 0) is None
    assert sign_test(5, 5) == 1.0
    assert sign_test(6, 0) == 0.0312  # 2 / 2**6
    assert sign_test(31, 0) == 9.31e-10
    assert sign_test(0, 6) == sign_test(6, 0)


def test_no_line_right_without_context_has_no_relative_change_or_interval() -> None:
    effect = paired_effect([(False, True), (False, False)])
    assert (effect.without, effect.with_, effect.relative_change) == (0.0, 0.5, None)
    assert effect.interval is None and effect.won == 1


def test_the_interval_is_reproducible_and_holds_the_measured_change() -> None:
    pairs = [(True, True)] * 6 + [(False, True)] * 9 + [(True, False)] * 1 + [(False, False)] * 24
    a, b = paired_effect(pairs), paired_effect(pairs)
    assert a == b  # (a fixed seed: the same run always reports the same interval)
    assert a.relative_change == round((15 - 7) / 7, 3)
    assert a.interval is not None and a.interval[0] < a.relative_change < a.interval[1]
    assert a.as_dict()["with"] == 0.375 and isinstance(a.as_dict()["interval"], list)


def test_nothing_paired_is_empty() -> None:
    assert paired_effect([]).n == 0
