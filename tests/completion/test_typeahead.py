"""Typing through a shown suggestion."""

from __future__ import annotations

from fimble.completion.typeahead import TypeAhead


def test_typed_characters_of_the_suggestion_leave_its_rest() -> None:
    t = TypeAhead()
    t.remember("doc", "x = fo", "\nend", "o(1, 2)", False)
    assert t.lookup("doc", "x = foo", "\nend") == ("(1, 2)", False)
    assert t.lookup("doc", "x = foo(1", "\nend") == (", 2)", False)


def test_anything_else_misses() -> None:
    t = TypeAhead()
    t.remember("doc", "x = fo", "\nend", "o(1)", True)
    assert t.lookup("doc", "x = fo", "\nend") is None  # nothing typed: the model's answer stands anyway
    assert t.lookup("doc", "x = fox", "\nend") is None  # typed something else
    assert t.lookup("doc", "x = foo", "\nchanged") is None  # the text after the cursor changed
    assert t.lookup("doc", "x = foo(1)", "\nend") is None  # typed all of it
    assert t.lookup("other", "x = foo", "\nend") is None
    t.forget("doc")
    assert t.lookup("doc", "x = foo", "\nend") is None


def test_bounded_number_of_documents() -> None:
    t = TypeAhead(max_keys=2)
    for key in ("a", "b", "c"):
        t.remember(key, "p", "s", "xyz", False)
    assert t.lookup("a", "px", "s") is None
    assert t.lookup("c", "px", "s") == ("yz", False)
