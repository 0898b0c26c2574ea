"""The VS Code extension's pure parts (finding fimble, settings, status bar, explain text), tested with
Node's own test runner (``editors/vscode/test/*.test.ts``) and reported here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # needs the Node toolchain (installed and cached by setup.sh)

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent


def test_extension_unit_tests_pass() -> None:
    node_bin = subprocess.run(
        ["bash", str(HERE / "setup.sh"), "--node"], capture_output=True, text=True, timeout=600, check=True
    ).stdout.strip()
    make = subprocess.run(["make", "--no-print-directory", "vsix"], cwd=ROOT, capture_output=True, text=True)
    assert make.returncode == 0, make.stderr[-4000:]  # also installs the extension's node_modules
    env = {**os.environ, "PATH": f"{node_bin}:{os.environ['PATH']}"}
    proc = subprocess.run(
        ["npm", "test", "--silent"],
        cwd=ROOT / "editors" / "vscode",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout or "ℹ fail 0" in proc.stdout
