"""The cursor line's indentation left out of the prompt and written by the model (``prompt.heal``)."""

from __future__ import annotations

from fimble.completion.prompt.heal import HealGuide, healed_on_text, healed_stop, split_indent, unheal


def test_only_an_indentation_before_the_cursor_is_left_out() -> None:
    assert split_indent("def f():\n    ") == ("def f():\n", "    ")
    assert split_indent("if x:\n\t\t") == ("if x:\n", "\t\t")
    assert split_indent("    ") == ("", "    ")


def test_a_line_with_code_before_the_cursor_or_column_zero_keeps_its_prefix() -> None:
    for prefix in ("def f():\n    return ", "x = 1\n", "", "def f():\n    r"):
        assert split_indent(prefix) == (prefix, "")


def test_the_answer_is_shown_after_the_indentation_or_not_at_all() -> None:
    assert unheal("    return 1", "    ") == "return 1"
    assert unheal("return 1", "") == "return 1"
    assert unheal("  return 1", "    ") == ""  # a line one level out: not what the cursor's line is
    assert unheal("\n    x", "    ") == ""


def test_stop_rules_see_the_text_after_the_indentation_and_cut_in_the_generated_text() -> None:
    seen: list[str] = []

    def stop(text: str) -> tuple[str, int] | None:
        seen.append(text)
        return ("newline", text.index("\n")) if "\n" in text else None

    check = healed_stop(stop, "    ")
    assert check is not None
    assert check("   ") is None and check("    ") is None  # still writing the indentation
    assert seen == []
    assert check("    return") is None
    assert check("    return 1\n") == ("newline", 4 + len("return 1"))
    assert seen == ["return", "return 1\n"]


def test_a_generation_that_leaves_the_indentation_stops_with_nothing_kept() -> None:
    check = healed_stop(None, "        ")
    assert check is not None
    assert check("\n") == ("indent", 0)
    assert check("    x") == ("indent", 0)
    assert check("        x") is None
    assert healed_stop(None, "") is None


def test_streamed_text_starts_after_the_indentation() -> None:
    seen: list[str] = []
    on_text = healed_on_text(seen.append, "  ")
    assert on_text is not None
    for text in (" ", "  ", "  re", "  return"):
        on_text(text)
    assert seen == ["re", "return"]


def test_the_guide_takes_the_best_token_that_writes_the_indentation() -> None:
    guide = HealGuide("        ")
    ranked = [(1, "\n", 3.0), (2, "    ", 2.0), (3, "       ", 1.0), (4, "        ", 0.5)]
    assert guide.pick("", ranked) == 2  # "\n" does not fit; four spaces are the best that do
    assert not guide.released
    ranked = [(5, "return", 2.0), (6, " return", 1.0), (7, "    ", 0.1)]
    assert guide.pick("       ", ranked) == 6  # one space left: a word with its space covers it
    assert guide.pick("        return", [(8, " x", 1.0), (9, "(", 0.5)]) == 8  # past it: the model's
    assert guide.released


def test_the_guide_gives_up_when_no_best_token_fits() -> None:
    guide = HealGuide("    ")
    assert guide.pick("", [(1, "\n", 3.0), (2, "  x", 1.0)]) == 1  # the stop check ends it empty
    assert guide.pick("", [(0, "", 2.0), (3, "    ", 1.0)]) == 3  # the end of generation does not fit


class _Inner:
    """A guide that records what it is shown."""

    def __init__(self) -> None:
        self.released = False
        self.breadth = 40
        self.pieces = None
        self.shown: list[str] = []

    def pick(self, text: str, ranked: list[tuple[int, str, float]]) -> int:
        self.shown.append(text)
        self.released = True
        return ranked[-1][0]

    def fresh(self) -> _Inner:
        return _Inner()


def test_an_import_guide_behind_the_indentation_sees_the_line_without_it() -> None:
    inner = _Inner()
    guide = HealGuide("    ", inner)  # type: ignore[arg-type]
    assert guide.breadth == 40
    assert guide.pick("", [(1, "    ", 1.0)]) == 1
    assert not guide.released  # the inner guide has not stepped aside yet
    assert guide.pick("    from", [(2, " x", 1.0), (3, " os", 0.5)]) == 3
    assert inner.shown == ["from"]
    assert guide.released
    again = guide.fresh()
    assert not again.released and isinstance(again.inner, _Inner) and again.inner is not inner
