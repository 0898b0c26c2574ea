"""Names a file uses but does not bind: found textually, looked up in the index."""

from __future__ import annotations

from fimble.completion.context.unbound import code_only, import_rows, unbound_definitions, unbound_names
from fimble.indexer.types import Definition, Span


def test_unbound_names_skip_parameters_locals_and_strings_but_not_call_arguments() -> None:
    body = (
        "def f(self, a: dict[str, int] = {},\n      *args, b=Foo(1), **kw) -> Result:\n"
        "    pytest.raises(MissingError, match='Quoted')  # Commented\n"
        "    g = lambda q, r: q + r + zed\n    for item in g:\n        total = item\n"
        "    return a + b + args + kw + total + Bar\n"
    )
    assert unbound_names(body, {"pytest"}) == ["Foo", "Result", "MissingError", "zed", "Bar"]


def test_code_only_blanks_strings_and_comments_line_for_line() -> None:
    text = 'def f():\n    """All\n    blueprints."""\n    x = "name"  # note\n    return x\n'
    out = code_only(text)
    assert out.count("\n") == text.count("\n")
    assert "blueprints" not in out and "name" not in out and "note" not in out
    assert out.split("\n")[4] == "    return x"


def test_import_rows_cover_a_parenthesised_name_list() -> None:
    lines = ["import os", "from a import (", "    b,", "    c,", ")", "x = 1", "from d import e"]
    assert import_rows(lines) == {0, 1, 2, 3, 4, 6}


def _def(path: str, name: str, kind: str = "function", scope: str = "", signature: str = "") -> Definition:
    """The indexer's own record, as ``definitions`` returns it."""
    qualname = f"{scope}.{name}" if scope else name
    return Definition(path, "python", kind, name, qualname, scope, Span(0, 0, 0, 0), signature, "")


class _Index:
    def __init__(self, defs: list[Definition]) -> None:
        self.defs = defs

    def definitions(self, name: str, limit: int = 50) -> list[Definition]:
        return [d for d in self.defs if d.name == name][:limit]

    def file_outline(self, path: str) -> list[Definition]:
        return [d for d in self.defs if d.path == path]


def test_only_names_defined_once_elsewhere_at_top_level_are_shown() -> None:
    index = _Index(
        [
            _def("log.py", "logger", "variable", signature="logger = get()"),
            _def("a.py", "helper", signature="def helper():"),
            _def("b.py", "helper", signature="def helper(x):"),  # two files: ambiguous
            _def("app.py", "local", signature="def local():"),  # the current file
            _def("m.py", "method", scope="C", signature="def method(self):"),
        ]
    )
    seen: set[tuple[str, str]] = set()
    found = unbound_definitions(index, "app.py", ["logger", "helper", "local", "method", "nothing"], seen)
    assert [(d.path, name, text) for d, name, text in found] == [("log.py", "logger", "logger = get()")]
    assert ("log.py", "logger") in seen
    assert unbound_definitions(index, "app.py", ["logger"], seen) == []
    assert unbound_definitions(object(), "app.py", ["logger"], set()) == []


def test_forward_references_and_all_entries_count_as_uses_after_the_code_s_own() -> None:
    body = (
        '__all__ = ["Agent", "Runner", "helper"]\n'
        'def f(x: "Trace | None", y: list["MCPServer"]) -> "t.Optional[Span]":\n'
        '    d = {"key": "value"}\n    return Missing\n\ndef helper(): pass\n'
    )
    assert unbound_names(body, {"t"}) == ["Missing", "Agent", "Trace", "MCPServer", "Span", "Runner"]
