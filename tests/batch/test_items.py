"""Input lines of `fimble batch`: the three kinds, the options, and a bad line's error record."""

from __future__ import annotations

import json

from fimble.batch import BatchItem, ItemError, parse_items
from fimble.completion.prompt.raw_prompt import RawPrompt


def lines(*objs: object) -> list[str]:
    return [o if isinstance(o, str) else json.dumps(o) for o in objs]


def test_each_kind_of_line_is_read() -> None:
    resolved: list[tuple[str, int, int]] = []

    def resolve(path: str, line: int, col: int) -> RawPrompt:
        resolved.append((path, line, col))
        return RawPrompt("pre", "suf", fim=True, path=path)

    out = list(
        parse_items(
            lines(
                {"id": "f", "prefix": "a = ", "suffix": "\n", "max_tokens": 9, "stop": "\n"},
                {"id": 2, "prompt": "# hello", "multiline": True},
                {"id": "p", "path": "src/x.py", "line": 3, "col": 5},
            ),
            resolve,
        )
    )
    assert all(isinstance(o, BatchItem) for o in out)
    fim, plain, pos = out
    assert (fim.raw.fim, fim.raw.prefix, fim.options.max_tokens, fim.options.stop) == (
        True,
        "a = ",
        9,
        ("\n",),
    )
    assert (plain.id, plain.raw.fim, plain.options.multiline) == ("2", False, True)
    assert resolved == [("src/x.py", 3, 5)] and pos.raw.path == "src/x.py"


def test_a_bad_line_is_an_error_record_and_the_rest_is_read() -> None:
    out = list(
        parse_items(
            lines(
                "{not json",
                {"prompt": "no id"},
                {"id": "a", "prompt": "x"},
                {"id": "a", "prompt": "again"},
                {"id": "b"},
                {"id": "c", "prompt": "x", "max_tokens": 0},
                {"id": "d", "prefix": 3},
                {"id": "e", "path": "x.py", "line": 0, "col": 1},
                "",
                [1, 2],
                {"id": "z", "prompt": "fine"},
            )
        )
    )
    errors = [o for o in out if isinstance(o, ItemError)]
    assert [(e.id, e.line_no) for e in errors] == [
        ("line:1", 1),
        ("line:2", 2),
        ("a", 4),
        ("b", 5),
        ("c", 6),
        ("d", 7),
        ("e", 8),
        ("line:10", 10),
    ]
    assert "earlier line" in errors[2].error and "max_tokens" in errors[4].error
    assert [o.id for o in out if isinstance(o, BatchItem)] == ["a", "z"]


def test_positions_need_a_resolver() -> None:
    (out,) = parse_items(lines({"id": "p", "path": "x.py", "line": 1, "col": 1}))
    assert isinstance(out, ItemError) and "not supported" in out.error
