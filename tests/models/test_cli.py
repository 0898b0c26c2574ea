"""The `fimble models` and `fimble doctor` commands through click (and one real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fimble.cli import cli
from fimble.models import doctor as doctor_mod
from tests.models.conftest import FakeSetup
from tests.models.helpers import tiny_model_gguf


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_models_help_in_a_subprocess() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from fimble.cli import main; main()", "models", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for verb in ("list", "pull", "verify", "path", "import", "rm"):
        assert verb in out


def test_full_cycle_with_real_pip_from_find_links(fake: FakeSetup, tmp_path: Path) -> None:
    code, out, err = _run("models", "list")
    assert code == 0 and "tiny-test *" in out and "missing" in out and "MIT" in out

    code, out, err = _run("models", "path", fake.name)
    assert code == 1 and f"run `fimble models pull {fake.name}`" in err

    code, out, err = _run("models", "pull", fake.name, "--find-links", str(fake.wheels), "-q")
    assert code == 0, err
    assert out.strip() == str(fake.file) and "ready in" in err

    code, out, _ = _run("models", "list")
    row = next(line for line in out.splitlines() if line.startswith("tiny-test"))
    assert row.split()[4:] == ["verified", "MIT", "qwen2", "4096", "Q4_K_M", "qwen"]

    code, out, _ = _run("models", "list", "--json")
    [entry] = json.loads(out)
    assert entry["state"] == "verified" and entry["gguf"]["fim_tokens"]["prefix"] == 201

    assert _run("models", "path")[1].strip() == str(fake.file)
    code, out, _ = _run("models", "verify", "--full", "-q")
    assert code == 0 and "sha256 checked" in out
    assert "unchanged since last check" in _run("models", "verify", fake.name)[1]

    src = tmp_path / "other.gguf"
    src.write_bytes(tiny_model_gguf("deepseek"))
    code, out, err = _run("models", "import", str(src), "--name", "other", "-q")
    assert code == 0, err
    assert "deepseek" in _run("models", "list")[1]

    code, out, _ = _run("models", "rm", "other")
    assert code == 0 and "removed" in out
    code, _, err = _run("models", "rm", "other")
    assert code == 1 and "nothing to remove" in err


def test_verify_reports_corruption(fake: FakeSetup) -> None:
    _run("models", "pull", fake.name, "--find-links", str(fake.wheels), "-q")
    with open(fake.file, "r+b") as fh:
        fh.truncate(50)
    code, _, err = _run("models", "verify")
    assert code == 1 and "--force" in err
    code, _, err = _run("models", "path", fake.name)
    assert code == 1 and f"fimble models pull {fake.name} --force" in err


def test_pull_errors_are_one_line(fake: FakeSetup, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _run("models", "pull", fake.name, "--find-links", str(empty), "-q")
    assert code == 1 and err.startswith("fimble: pip could not download") and "Traceback" not in err
    code, _, err = _run("models", "pull", "no-such-model")
    assert code == 1 and "unknown model 'no-such-model'" in err


def test_doctor_text_and_json(fake: FakeSetup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        doctor_mod, "check_llama_cpp", lambda: doctor_mod.CheckResult("llama-cpp", "ok", "stub")
    )
    code, out, _ = _run("doctor")
    assert code == 1
    assert "FAIL  model" in out and f"fix: fimble models pull {fake.name}" in out
    _run("models", "pull", fake.name, "--find-links", str(fake.wheels), "-q")
    code, out, _ = _run("doctor", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    assert {c["name"] for c in report["checks"]} >= {
        "cpu",
        "memory",
        "disk",
        "llama-cpp",
        "model",
        "fim",
        "threads",
    }
    code, out, _ = _run("doctor")
    assert code == 0 and "recommended threads" in out
