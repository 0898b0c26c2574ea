"""`fimble complete`: argument parsing, input errors, and the real command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fimble.commands.complete import offset_of, parse_location, read_source
from fimble.errors import InputError
from tests.model_paths import SMALL, model_path

EXAMPLE = Path(__file__).parents[2] / "fimble" / "examples" / "dates.py"


def test_parse_location() -> None:
    assert parse_location("a/b.py:3:7") == (Path("a/b.py"), 3, 7)
    assert parse_location("C:/x/b.py:1:1") == (Path("C:/x/b.py"), 1, 1)
    for bad in ("b.py", "b.py:3", "b.py:x:1", "b.py:0:1", ":1:1"):
        with pytest.raises(InputError):
            parse_location(bad)


def test_offset_of_counts_characters(tmp_path: Path) -> None:
    text = "héllo\n😀x\n"
    assert offset_of(text, 1, 1, tmp_path) == 0
    assert offset_of(text, 2, 2, tmp_path) == 7  # after the emoji: one character, not two UTF-16 units
    assert offset_of(text, 2, 3, tmp_path) == 8
    with pytest.raises(InputError, match="past the end of the line"):
        offset_of(text, 1, 8, tmp_path)
    with pytest.raises(InputError, match="past the end of the file"):
        offset_of(text, 9, 1, tmp_path)


def test_read_source_refuses_binary_and_missing(tmp_path: Path) -> None:
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x00\x01\x02abc")
    with pytest.raises(InputError, match="binary"):
        read_source(binary)
    with pytest.raises(InputError, match="no such file"):
        read_source(tmp_path / "missing.py")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"caf\xe9 = 1\n")
    with pytest.raises(InputError, match="not UTF-8"):
        read_source(latin)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fimble", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_help_lists_options() -> None:
    out = run("complete", "--help")
    assert out.returncode == 0
    for option in ("--model", "--max-tokens", "--multiline", "--json"):
        assert option in out.stdout


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("missing.py:1:1", "no such file"),
        (f"{EXAMPLE}:99:1", "past the end of the file"),
        (f"{EXAMPLE}:1:500", "past the end of the line"),
    ],
)
def test_input_errors_are_one_line_without_traceback(location: str, message: str) -> None:
    out = run("complete", location)
    assert out.returncode == 1
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1


def test_missing_model_names_the_fix(tmp_path: Path) -> None:
    out = run("complete", f"{EXAMPLE}:8:22", env={"FIMBLE_HOME": str(tmp_path)})
    assert out.returncode == 1
    assert "fimble models pull" in out.stderr
    assert "Traceback" not in out.stderr


def test_corrupt_model_file_is_refused(tmp_path: Path) -> None:
    truncated = tmp_path / "broken.gguf"
    truncated.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    out = run("complete", f"{EXAMPLE}:8:22", "--model", str(truncated))
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "broken.gguf" in out.stderr


@pytest.mark.model
def test_complete_prints_a_real_suggestion_as_json() -> None:
    out = run(
        "complete", f"{EXAMPLE}:8:22", "--model", str(model_path(SMALL)), "--json", "-n", "16", "--no-context"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["completion"].strip()
    assert result["fim_family"] == "qwen"
    assert result["cpu_path"] in ("full", "no-amx", "plain")
    assert result["tokens_evaluated"] == result["prompt_tokens"]
    # `dates.append(|)`: the model's own closing paren would duplicate the one after the cursor.
    assert result["stop_reason"] in ("eog", "newline", "max_tokens", "stop_rule:bracket_balance")


def _workspace(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "shapes").mkdir()
    (root / "shapes" / "__init__.py").write_text("")
    (root / "shapes" / "geometry.py").write_text(
        'def rectangle_area(width: float, height: float) -> float:\n    """Area of a rectangle."""\n'
        "    return width * height\n"
    )
    app = root / "app.py"
    app.write_text("from shapes.geometry import rectangle_area\n\n\ndef total(rooms):\n    return sum(\n")
    return app


def test_without_an_index_the_note_says_how_to_get_context(tmp_path: Path) -> None:
    from fimble.commands._workspace import workspace_context, workspace_root

    app = _workspace(tmp_path / "ws")
    assert workspace_root(app) == (tmp_path / "ws").resolve()
    files, shown, note = workspace_context(app, app.read_text(), 10)
    assert files == () and shown == "app.py"
    assert note is not None and "fimble index" in note


@pytest.mark.model
def test_explain_shows_the_indexed_context_in_the_prompt(tmp_path: Path) -> None:
    app = _workspace(tmp_path / "ws")
    home = {"FIMBLE_HOME": str(tmp_path / "home")}
    assert run("index", str(app.parent), env=home).returncode == 0
    out = run("explain", f"{app}:5:16", "-m", str(model_path(SMALL)), "-n", "8", "--json", env=home)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    context = [p for p in result["parts"] if p["kind"] == "context"]
    assert [p["path"] for p in context] == ["shapes/geometry.py"]
    # The imported module's outline, or the same file found by BM25 (its whole text, which the
    # ranking prefers when both mention the names around the cursor): either way, with its reason.
    reason = context[0]["reason"]
    assert reason == "imported: rectangle_area" or reason.startswith("similar code (bm25"), reason
    assert result["note"] is None
    text = run("explain", f"{app}:5:16", "-m", str(model_path(SMALL)), "-n", "8", env=home)
    assert f"shapes/geometry.py  {reason}" in text.stdout


@pytest.mark.model
def test_complete_survives_a_cpu_path_that_crashes(tmp_path: Path) -> None:
    """The faster paths' probe children die of SIGSEGV (as on a VM whose AMX faults): the command
    still completes, on the plain path, and says so; when nothing runs it says how to rebuild."""
    crash = {"FIMBLE_CPU_PATH_DIR": str(tmp_path / "a"), "FIMBLE_PROBE_CRASH": "full=SIGSEGV,no-amx=SIGSEGV"}
    args = ("complete", f"{EXAMPLE}:8:22", "--model", str(model_path(SMALL)), "-n", "8", "--no-context")
    out = run(*args, "--json", env=crash)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["cpu_path"] == "plain"
    assert json.loads(out.stdout)["completion"].strip()
    everything = "full=SIGILL,no-amx=SIGILL,plain=SIGILL"
    dead = {"FIMBLE_CPU_PATH_DIR": str(tmp_path / "b"), "FIMBLE_PROBE_CRASH": everything}
    out = run(*args, env=dead)
    assert out.returncode == 1  # an error, not a core dump
    assert "make rebuild-llama" in out.stderr and "Traceback" not in out.stderr
