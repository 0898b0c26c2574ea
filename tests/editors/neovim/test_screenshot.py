"""The README's Neovim screenshot: the real terminal UI of Neovim 0.11 with fimble's ghost text.

Neovim runs in a pseudo-terminal (its own TUI, true colours), keys are typed into it as a user would,
and once the plugin draws a suggestion the screen is read by a terminal emulator (pyte) and drawn to a
PNG. The picture is a test artifact (``build/test-artifacts/neovim.png``); with
``FIMBLE_UPDATE_SCREENSHOTS=1`` it also replaces ``docs/screenshots/neovim.png``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.editors.neovim.conftest import PLUGIN, REPO, editor_env, nvim_path, project
from tests.model_paths import DEFAULT, model_path

pytestmark = [pytest.mark.model, pytest.mark.slow]

INIT = Path(__file__).with_name("screenshot.lua")
ARTIFACT = REPO / "build" / "test-artifacts" / "neovim.png"
README_PICTURE = REPO / "docs" / "screenshots" / "neovim.png"
COLUMNS, LINES = 88, 22


def test_screenshot_of_ghost_text_in_the_terminal(tmp_path: Path) -> None:
    from tests.editors.neovim.tui import Terminal, render_png

    source = project(tmp_path / "project")
    source.write_text(source.read_text().replace("dates.\n", "dates.append(dt.date(year, month, day))\n"))
    ready, shown = tmp_path / "ready", tmp_path / "shown"
    env = editor_env(
        tmp_path,
        TERM="xterm-256color",
        COLORTERM="truecolor",
        FIMBLE_PLUGIN=str(PLUGIN),
        FIMBLE_SETUP=json.dumps({"settings": {"maxTokens": 64, "deadlineMs": 120_000}}),
        FIMBLE_FILE=str(source),
        FIMBLE_READY=str(ready),
        FIMBLE_SHOWN=str(shown),
        FIMBLE_MODEL=str(model_path(DEFAULT)),  # the default model: the picture shows what users get
    )
    term = Terminal(
        [nvim_path(), "-i", "NONE", "-u", str(INIT)], columns=COLUMNS, lines=LINES, env=env, cwd=source.parent
    )
    try:
        assert term.wait(lambda: "dates = []" in "\n".join(term.text()), 60), term.text()
        assert term.wait(ready.exists, 300), "the model never loaded:\n" + "\n".join(term.text())
        # A new function after the example: its body comes as a multi-line suggestion.
        term.send("Go\r\rdef parse_times(rows):\r")  # one write: no suggestion in between
        for _attempt in range(3):
            if term.wait(shown.exists, 180):
                break
            term.send("\x1b\\")  # <M-\>: ask explicitly
        assert shown.exists(), "no suggestion was shown:\n" + "\n".join(term.text())
        term.settle()
        suggestion = shown.read_text().splitlines()
        screen = term.text()
        # What the terminal shows: the typed line, the suggestion's lines below it, in insert mode.
        row = next(i for i, line in enumerate(screen) if "def parse_times(rows):" in line)
        first = suggestion[0].strip()
        assert first and first in screen[row + 1], screen
        for offset, line in enumerate(suggestion[1:], start=2):
            if line.strip() and row + offset < LINES - 2:
                assert line.rstrip() in screen[row + offset], (line, screen)
        assert any("-- INSERT --" in line for line in screen), screen
        # Drawn in a colour other than the code's (the FimbleSuggestion highlight).
        col = screen[row + 1].index(first)
        ghost_fg = term.screen.buffer[row + 1][col].fg
        code_fg = term.screen.buffer[row][screen[row].index("rows")].fg
        assert ghost_fg != code_fg, (ghost_fg, code_fg)
        render_png(term.screen, ARTIFACT)
    finally:
        term.close()
    assert ARTIFACT.stat().st_size > 10_000
    if os.environ.get("FIMBLE_UPDATE_SCREENSHOTS") == "1":
        README_PICTURE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACT, README_PICTURE)
