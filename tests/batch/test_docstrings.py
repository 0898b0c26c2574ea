"""`fimble batch --docstrings`: which defs get one, and a diff that `git apply` takes as is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fimble.batch.docstrings import find_targets, python_files, run_docstrings
from tests.batch.fake import FixedEngine
from tests.model_paths import SMALL, model_path

SOURCE = '''import functools


def documented(x):
    """Already here."""
    return x


class Plain:
    # a comment first
    def method(self):
        def inner():
            return 1
        return inner()


async def fetch(url):
    return url


@functools.cache
def cached(
    a,
    b,
):  # trailing comment
    return a + b


def one_liner(): return 0
'''


def _git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "pkg" / "mod.py").write_text(SOURCE)
    (repo / "pkg" / "broken.py").write_text("def broken(:\n    pass\n\ndef fine():\n    return 2")
    (repo / ".hidden").mkdir()
    (repo / ".hidden" / "skip.py").write_text("def skipped():\n    pass\n")
    return repo


def test_targets_are_defs_without_a_docstring() -> None:
    names = [t.name for t in find_targets(SOURCE)]
    assert names == ["Plain", "method", "inner", "fetch", "cached"]
    cached = find_targets(SOURCE)[-1]
    assert SOURCE[cached.offset :].startswith("    return a + b")
    plain = find_targets(SOURCE)[0]
    assert SOURCE[plain.offset :].startswith("    # a comment first")
    assert find_targets(SOURCE)[2].indent == " " * 12


def test_hidden_directories_are_skipped(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path)
    assert [p.name for p in python_files(repo)] == ["broken.py", "mod.py"]


def test_diff_applies_and_write_gives_the_same_text(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path)
    result = run_docstrings(FixedEngine('Say why.\nSecond line."""'), repo / "pkg", width=2)
    assert result.diff.startswith("--- a/pkg/")
    assert (repo / "pkg" / "mod.py").read_text() == SOURCE  # nothing written
    patch = tmp_path / "docs.diff"
    patch.write_text(result.diff)
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True)
    subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True)
    new = (repo / "pkg" / "mod.py").read_text()
    assert new == result.new_texts[repo / "pkg" / "mod.py"]
    assert 'async def fetch(url):\n    """Say why."""\n    return url' in new
    assert '            """Say why."""\n            return 1' in new
    assert '):  # trailing comment\n    """Say why."""\n    return a + b' in new
    compile(new, "mod.py", "exec")
    # the broken file did not stop the run; its sound def got one, and no newline at the end survived
    broken = (repo / "pkg" / "broken.py").read_text()
    assert 'def fine():\n    """Say why.' in broken and broken.endswith("return 2")


def test_long_answers_are_indented_to_the_body() -> None:
    from fimble.batch.docstrings import _docstring

    assert (
        _docstring(" First.\n  second\n\nthird ", "    ")
        == '    """First.\n    second\n\n    third\n    """\n'
    )
    assert _docstring('has """ quotes', "") is None


def test_unsafe_or_empty_answers_are_dropped(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path)
    assert run_docstrings(FixedEngine("   \n"), repo / "pkg" / "mod.py").diff == ""
    assert run_docstrings(FixedEngine("ends in a backslash \\"), repo / "pkg" / "mod.py").diff == ""


def test_command_writes_only_with_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    command = importlib.import_module("fimble.commands.batch")

    repo = _git_repo(tmp_path)
    monkeypatch.setattr(command, "_engine", lambda *_: FixedEngine("Fixed."))
    mod = repo / "pkg" / "mod.py"
    out = CliRunner().invoke(command.batch, ["--docstrings", str(mod)])
    assert out.exit_code == 0, out.output
    assert mod.read_text() == SOURCE and '+    """Fixed."""' in out.stdout
    out = CliRunner().invoke(command.batch, ["--docstrings", str(mod), "--write", "-o", str(tmp_path / "d")])
    assert out.exit_code == 0, out.output
    assert '"""Fixed."""' in mod.read_text()
    assert CliRunner().invoke(command.batch, []).exit_code == 2  # neither IN.jsonl nor --docstrings


@pytest.mark.model
@pytest.mark.slow
def test_real_model_diff_applies(tmp_path: Path) -> None:
    model_path(SMALL)  # fails with the command that fetches it when `make models` was skipped
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef is_even(n):\n    return n % 2 == 0\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "fimble", "batch", "--docstrings", str(repo), "-m", SMALL, "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=repo,
    )
    assert proc.returncode == 0, proc.stderr
    patch = tmp_path / "docs.diff"
    patch.write_text(proc.stdout)
    assert proc.stdout.startswith("--- a/calc.py"), proc.stderr  # the 0.5B model documents `add`
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True)
