"""Typing through a shown suggestion."""

from __future__ import annotations

from fimble.completion.engine.cancel import CancelToken
from fimble.completion.typeahead import Flight, FlightCancel, TypeAhead


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


def test_an_invoked_request_passes_over_a_provisional_suggestion() -> None:
    t = TypeAhead()
    t.remember("doc", "x = fo", "\nend", "o(1)", False, provisional=True)
    assert t.lookup("doc", "x = foo", "\nend") == ("(1)", False)
    assert t.lookup("doc", "x = foo", "\nend", full_prompt=True) is None
    t.remember("doc", "x = fo", "\nend", "o(1)", False)  # the full prompt's answer
    assert t.lookup("doc", "x = foo", "\nend", full_prompt=True) == ("(1)", False)


def test_bounded_number_of_documents() -> None:
    t = TypeAhead(max_keys=2)
    for key in ("a", "b", "c"):
        t.remember(key, "p", "s", "xyz", False)
    assert t.lookup("a", "px", "s") is None
    assert t.lookup("c", "px", "s") == ("yz", False)


def test_a_prefetched_continuation_follows_the_accepted_suggestion() -> None:
    t = TypeAhead()
    t.remember("doc", "if x", "\n", ":", False)
    assert t.extend("doc", "if x", "\n", ":", "\n    return 1")
    assert t.lookup("doc", "if x:", "\n") == ("\n    return 1", True)  # accepted: the next line
    assert t.lookup("doc", "if x:\n    ret", "\n") == ("urn 1", True)  # and typed into
    assert t.lookup("doc", "if x:\n  x", "\n") is None
    assert not t.extend("doc", "if x", "\n", "other", "\nmore")  # no longer the shown suggestion


def test_a_flight_accepts_what_agrees_with_its_output_so_far() -> None:
    flight = Flight("doc", "x = fo", "\n", "a.py", 16)
    flight.waiters.append(CancelToken())
    assert flight.accepts("x = foo", "\n", "a.py", 16) is None  # not running yet: supersede instead
    flight.running = True
    assert flight.accepts("x = foo", "\n", "a.py", 16) == "o"  # nothing produced yet: agrees
    flight.produced = "o(1"
    assert flight.accepts("x = foo(", "\n", "a.py", 16) == "o("
    assert flight.accepts("x = foo(1, 2", "\n", "a.py", 16) == "o(1, 2"  # typed past it: may agree
    assert flight.accepts("x = fox", "\n", "a.py", 16) is None
    assert flight.accepts("x = foo", "\nchanged", "a.py", 16) is None
    assert flight.accepts("x = foo", "\n", "b.py", 16) is None
    assert flight.accepts("x = fo", "\n", "a.py", 16) == ""  # the same place: wait for it
    assert flight.accepts("x = f", "\n", "a.py", 16) is None  # deleted a character


def test_a_flight_is_cancelled_when_every_waiter_is() -> None:
    flight = Flight("doc", "p", "s", None, 16)
    first, second = CancelToken(), CancelToken()
    flight.waiters += [first, second]
    token = FlightCancel(flight)
    first.cancel("cancelled")
    assert not token.cancelled
    second.cancel("deadline")
    assert token.cancelled and token.reason == "deadline"
    again = FlightCancel(Flight("doc", "p", "s", None, 16, waiters=[CancelToken()], dead=True))
    assert again.cancelled and again.reason == "superseded"
