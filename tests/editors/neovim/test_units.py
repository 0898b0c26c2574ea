"""The plugin's pieces that need Neovim but no server: word/line splitting, setup, :Fimble, help tags."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.editors.neovim.conftest import PLUGIN, editor_env, nvim_path


def _run(tmp_path: Path) -> dict:
    out = tmp_path / "out.json"
    script = Path(__file__).with_name("units.lua")
    proc = subprocess.run(
        [nvim_path(), "--headless", "-i", "NONE", "--clean", "-l", str(script), str(PLUGIN), str(out)],
        env=editor_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.exists(), proc.stdout + proc.stderr
    return json.loads(out.read_text())


def test_plugin_units(tmp_path: Path) -> None:
    data = _run(tmp_path)
    assert dict(map(tuple, data["next_word"])) == {
        "dt.date(year)": "dt",
        ".date(year)": ".",
        "  foo bar": "  foo",
        "\n    return x": "\n    return",
        "()": "()",
        "": "",
    }
    assert dict(map(tuple, data["next_line"])) == {
        "abc\ndef": "abc",
        "\n    x = 1\n    y": "\n    x = 1",
        "abc": "abc",
        "  \n  z": "  \n  z",
    }
    # "é" is two bytes, one UTF-16 unit: the range's character 14 is byte 15, where "foo" starts.
    n = len('    s = "é" + foo'.encode())
    assert data["shown"] == [["bar()", n], ["_bar()", n], [], []], data["shown"]
    # Neovim 0.11: the plugin draws the ghost text and says so to the server, which then does not
    # offer the same suggestion again as a completion item.
    assert data["mode"] == "plugin" and data["command"] is True
    assert data["complete"] == ["status", "toggle", "explain", "reindex"]
    assert data["config"]["cmd"] == ["fimble-not-installed"]
    assert data["config"]["filetypes"] == ["lua"]  # a list option replaces the default list
    assert data["config"]["init_options"] == {"multiline": "auto"}
    assert data["config"]["inline"] == {"dynamicRegistration": False}
    assert data["hl"].get("link") == "Comment" and data["visible"] is False
    tags = {line.split("\t")[0] for line in data["helptags"]}
    assert {"fimble.txt", ":Fimble", "fimble.setup()", "fimble-keys", "hl-FimbleSuggestion"} <= tags, data
