"""`fimble eval`: argument errors are one line saying what to do (the real run is in tests/evaluation)."""

from __future__ import annotations

from click.testing import CliRunner

from fimble.cli import cli
from fimble.commands.eval import _models, _think_times


def test_needs_a_repository_or_a_pypi_spec() -> None:
    result = CliRunner().invoke(cli, ["eval"])
    assert result.exit_code == 1 and "give a repository folder or --pypi" in result.output
    result = CliRunner().invoke(cli, ["eval", "--pypi", "requests"])
    assert result.exit_code == 1 and "NAME==VERSION" in result.output


def test_models_repeat_and_split() -> None:
    assert _models(("a",), "b, c,a") == ("a", "b", "c")
    assert _models((), None) == ("qwen2.5-coder-1.5b",)


def test_help_lists_the_options() -> None:
    out = CliRunner().invoke(cli, ["eval", "--help"]).output
    for option in (
        "--pypi",
        "--samples",
        "--seed",
        "--model",
        "--models",
        "--context",
        "--out",
        "--mode",
        "--think-ms",
        "--server-option",
        "--language",
    ):
        assert option in out
    assert "served|ceiling|both" in out and "cases.jsonl" in out


def test_think_times_repeat_and_split() -> None:
    assert _think_times(("0,2000",)) == (0, 2000)
    assert _think_times(("500", "0, 500", "")) == (500, 0)
    result = CliRunner().invoke(cli, ["eval", "x", "--think-ms", "soon"])
    assert result.exit_code != 0 and "expected milliseconds" in result.output


def test_a_server_option_without_a_value_is_one_line_saying_what_to_write(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["eval", str(tmp_path), "--server-option", "deadlineMs"])
    assert result.exit_code == 1 and "KEY=VALUE" in result.output
