"""`fimble index` through click, on the real index (tests/indexer owns the command's tests)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from fimble.cli import cli
from tests.indexer.test_store import _python, _wait_line


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["index", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_help() -> None:
    code, out, _ = run("--help")
    assert code == 0
    for option in (
        "--watch",
        "--stats",
        "--rebuild",
        "--find",
        "--outline",
        "--imports",
        "--search",
        "--exclude",
    ):
        assert option in out


def test_index_then_lookups(workspace: Path) -> None:
    code, out, err = run(str(workspace), "--workers", "0")
    assert code == 0, err
    assert "parsed" in out and "definitions" in out
    code, out, _ = run(str(workspace), "--workers", "0")
    assert code == 0 and " 0 parsed" in out

    code, out, _ = run(str(workspace), "--find", "Store.Get")
    assert code == 0
    assert "goproj/store/store.go:28: method Store.Get" in out
    assert "func (s *Store) Get(key string) string" in out and "# Get returns the value for key." in out

    code, out, _ = run(str(workspace), "--outline", str(workspace / "pyproj/pkg/models.py"))
    assert code == 0 and "class User" in out and "def greeting(self, polite: bool = True) -> str:" in out

    code, out, _ = run(str(workspace), "--imports", str(workspace / "web/src/app.tsx"))
    assert "./util (add, Counter, Point) -> web/src/util.ts" in out

    code, out, _ = run(str(workspace), "--search", "zanzibarquux")
    assert out.startswith("docs/README.md:1-4")

    code, out, _ = run(str(workspace), "--find", "User", "--json")
    (found,) = json.loads(out)
    assert found["path"] == "pyproj/pkg/models.py" and found["span"]["start_line"] == 11

    code, out, err = run(str(workspace), "--find", "NoSuchThing")
    assert code == 0 and out == "" and "no definition" in err


def test_stats_and_rebuild(workspace: Path) -> None:
    code, out, _ = run(str(workspace), "--workers", "0", "--stats")
    assert code == 0 and "ready" in out and "languages" in out and "python" in out
    code, out, _ = run(str(workspace), "--workers", "0", "--rebuild", "--stats", "--json")
    stats = json.loads(out)
    assert stats["ready"] and stats["files"] > 20


def test_exclude_option(workspace: Path) -> None:
    run(str(workspace), "--workers", "0", "--exclude", "goproj/")
    _, out, _ = run(str(workspace), "--find", "Store")
    assert "goproj" not in out


def test_errors_are_one_line(tmp_path: Path, workspace: Path) -> None:
    result = CliRunner().invoke(cli, ["index", str(tmp_path / "missing")])
    assert (
        result.exit_code == 1 and result.stderr.startswith("fimble: ") and "does not exist" in result.stderr
    )
    result = CliRunner().invoke(cli, ["index", str(workspace), "--find", "User"])
    assert result.exit_code == 1 and "no index yet; run `fimble index" in result.stderr
    result = CliRunner().invoke(cli, ["index", str(workspace), "--find", "User", "--watch"])
    assert result.exit_code == 2


def test_locked_store(workspace: Path, fimble_home: Path) -> None:
    proc = _python(
        f"""
        import time
        from fimble.indexer import IndexConfig, WorkspaceIndex
        ix = WorkspaceIndex.open({str(workspace)!r}, IndexConfig(workers=0))
        ix.build()
        print("LOCKED", flush=True)
        time.sleep(60)
        """,
        fimble_home,
    )
    try:
        _wait_line(proc, "LOCKED")
        result = CliRunner().invoke(cli, ["index", str(workspace)])
        assert result.exit_code == 1
        assert f"another fimble process (pid {proc.pid})" in result.stderr
        result = CliRunner().invoke(cli, ["index", str(workspace), "--find", "User"])
        assert result.exit_code == 0 and "pyproj/pkg/models.py" in result.stdout
    finally:
        proc.kill()
        proc.wait()


def test_watch_mode(workspace: Path, fimble_home: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.indexer.test_store import ROOT

    env = {**os.environ, "FIMBLE_HOME": str(fimble_home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fimble", "index", str(workspace), "--watch", "--workers", "0"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_line_err(proc, "watching")
        (workspace / "pyproj/watched.py").write_text("def appeared_while_watching(): pass\n")
        deadline = time.monotonic() + 20
        out = ""
        while time.monotonic() < deadline and "watched.py" not in out:
            out = run(str(workspace), "--find", "appeared_while_watching")[1]
            time.sleep(0.1)
        assert "pyproj/watched.py:1: function appeared_while_watching" in out
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()


def _wait_line_err(proc, expected: str) -> None:
    for line in proc.stderr:
        if expected in line:
            return
    raise AssertionError(f"no {expected!r}; exit {proc.poll()}")
