"""The served evaluation's pieces that need no server: options, the workspace copy, rows, positions."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fimble.errors import InputError
from fimble.evaluation.cases import positions_of
from fimble.evaluation.samples import Sample
from fimble.evaluation.served import (
    copy_workspace,
    initialization_options,
    parse_server_option,
    served_row,
)
from fimble.evaluation.served_client import answer_text, small_count, utf16_column


def test_server_options_are_json_when_they_can_be_and_nest_by_dots() -> None:
    assert parse_server_option("deadlineMs=8000") == ("deadlineMs", 8000)
    assert parse_server_option("speculative=false") == ("speculative", False)
    assert parse_server_option("multiline=never") == ("multiline", "never")
    assert parse_server_option('index.exclude=["**/gen/**"]') == ("index.exclude", ["**/gen/**"])
    for bad in ("deadlineMs", "=3", "a..b=1"):
        with pytest.raises(InputError, match="KEY=VALUE"):
            parse_server_option(bad)
    options = initialization_options(
        48, {"deadlineMs": 8000, "index.exclude": ["x"], "maxTokens": 16}, {"prefixTokens": 768}
    )
    # the user's --server-option wins over what the eval sets itself
    assert options == {"maxTokens": 16, "prefixTokens": 768, "deadlineMs": 8000, "index": {"exclude": ["x"]}}
    assert initialization_options(48, {}) == {"maxTokens": 48}  # deadlines stay the server's defaults


def test_the_workspace_copy_leaves_the_source_alone_and_skips_heavy_folders(tmp_path: Path) -> None:
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("x = 1\n")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    (src / "node_modules" / "dep").mkdir(parents=True)
    (src / "node_modules" / "dep" / "index.js").write_text("module.exports = 1")
    copy = copy_workspace(src, tmp_path / "scratch")
    assert copy == tmp_path / "scratch" / "proj"  # the same folder name: prompts show it
    assert (copy / "pkg" / "m.py").read_text() == "x = 1\n"
    assert not (copy / ".git").exists() and not (copy / "node_modules").exists()
    (copy / "pkg" / "m.py").write_text("masked")
    assert (src / "pkg" / "m.py").read_text() == "x = 1\n"


def test_lsp_positions_count_utf16_units() -> None:
    assert utf16_column("    x = 1", 4) == 4
    assert utf16_column("s = '😀' + name", 9) == 10  # the emoji is two UTF-16 units


def test_answers_and_status_fields() -> None:
    item = SimpleNamespace(insert_text="foo(a)\n    bar()")
    assert answer_text(SimpleNamespace(items=[item])) == "foo(a)\n    bar()"
    assert answer_text([item]) == "foo(a)\n    bar()" and answer_text(None) == ""
    assert answer_text(SimpleNamespace(items=[])) == ""
    assert small_count({"model": {"small_first_prompts": 3}}) == 3
    assert small_count({"model": {"state": "ready"}}) is None


TEXT = "def f(a, b):\n    total = compute(a, b)\n    return total\n"


def test_a_row_scores_the_first_line_and_keeps_how_the_server_answered() -> None:
    case = positions_of(Sample("m.py", 1, 4, "line_start", "total = compute(a, b)"), TEXT, "python")[0]
    last = {
        "trigger": "automatic",
        "outcome": "served",
        "context_ms": 3.0,
        "context_files": 1,
        "engine": {"stop_reason": "newline", "tokens_evaluated": 12, "tokens_reused": 800},
        "explain": {
            "parts": [
                {"kind": "context", "tokens": 300, "reason": "imported", "path": "g.py"},
                {"kind": "prefix", "tokens": 40, "reason": ""},
            ],
            "shape": "between statements",
        },
    }
    row = served_row(
        case,
        model="m",
        think_ms=0,
        request="automatic",
        visit="cold",
        text="total = compute(a, b)\n    return total",
        latency_ms=812.34,
        last=last,
        small_before=1,
        small_after=2,
    )
    assert row["exact"] and row["prediction"] == "total = compute(a, b)" and not row["empty"]
    assert row["latency_ms"] == 812.3 and row["small_first_prompt"] is True
    assert row["server"]["tokens_evaluated"] == 12 and row["server"]["context_tokens"] == 300
    assert row["server"]["chunks"] == [{"path": "g.py", "reason": "imported", "tokens": 300}]
    assert (row["case"], row["visit"], row["position"]) == ("m.py:2:5", "cold", "line_start")
    # no result (a deadline while reading the prompt): the engine numbers are the previous request's
    last = {"outcome": "deadline_prompt", "engine": {"tokens_evaluated": 9}}
    stale = served_row(
        case,
        model="m",
        think_ms=0,
        request="automatic",
        visit="cold",
        text="",
        latency_ms=4000,
        last=last,
        small_before=None,
        small_after=None,
    )
    assert stale["empty"] and not stale["exact"] and stale["server"]["tokens_evaluated"] is None
    assert stale["small_first_prompt"] is None and stale["server"]["outcome"] == "deadline_prompt"
