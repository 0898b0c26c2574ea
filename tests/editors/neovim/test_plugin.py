"""The Neovim plugin in a real headless Neovim 0.11 with the real server and model.

Keys are typed with nvim_feedkeys in insert mode; the observations after each step (buffer, cursor,
the ghost text extmarks) are checked here. What the model suggests is not fixed: the expectations are
computed from the suggestion that was shown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.editors.neovim.conftest import SETTINGS, run_scenario
from tests.model_paths import SMALL, model_path

pytestmark = [pytest.mark.model, pytest.mark.slow]


def _step(data: dict[str, Any], name: str) -> dict[str, Any]:
    steps = {s["name"]: s for s in data["steps"]}
    assert name in steps, data
    return steps[name]


def _next_word(text: str) -> str:
    m = re.match(r"\s*\w+", text) or re.match(r"\s*[^\w\s]+", text)
    return m.group(0) if m else text


@pytest.fixture(scope="module")
def ghost(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("nvim-ghost")
    data = run_scenario(tmp, "ghost", str(model_path(SMALL)), {"settings": SETTINGS})
    assert data["nvim"].startswith("0.11"), data
    return data


def test_ghost_text_appears_while_typing(ghost: dict[str, Any]) -> None:
    assert ghost.get("error") is None and ghost["mode"] == "plugin", ghost
    shown = _step(ghost, "shown")
    assert shown["mode"] == "i" and shown["lines"][7] == "        dates.append(", shown
    text = shown["suggestion"]
    assert text and "\n" not in text, shown
    [mark] = shown["marks"]
    # The first line is inline virtual text at the cursor, drawn in the plugin's highlight group.
    assert (mark["row"], mark["col"]) == (7, len("        dates.append(")), mark
    assert mark["virt_text"] == text and mark["virt_text_pos"] == "inline", mark
    assert mark["hl"] == "FimbleSuggestion" and mark["virt_lines"] == [], mark
    assert shown["stats"]["requests"] >= 1 and shown["stats"]["shown"] == 1, shown


def test_accept_word_then_line(ghost: dict[str, Any]) -> None:
    text = _step(ghost, "shown")["suggestion"]
    word = _next_word(text)
    after_word = _step(ghost, "accept_word")
    assert after_word["lines"][7] == "        dates.append(" + word, after_word
    assert after_word["cursor"] == [8, len("        dates.append(" + word)], after_word
    rest = text[len(word) :]
    if rest:  # the rest stays shown, right after the accepted word
        assert after_word["suggestion"] == rest, after_word
        [mark] = after_word["marks"]
        assert mark["virt_text"] == rest and mark["col"] == after_word["cursor"][1], after_word
    after_line = _step(ghost, "accept_line")
    assert after_line["lines"][7] == "        dates.append(" + text, after_line
    assert after_line["cursor"] == [8, len(after_line["lines"][7])], after_line
    assert after_line["marks"] == [] and after_line["suggestion"] is None, after_line
    assert after_line["mode"] == "i" and after_line["lines"][8] == "    return dates", after_line


def test_multiline_suggestion_dismiss_and_accept(ghost: dict[str, Any]) -> None:
    # Dismissing hides the suggestion; asked again, the whole of it goes in with <Tab>.
    dismissed = _step(ghost, "dismissed")
    assert dismissed["marks"] == [] and dismissed["suggestion"] is None, dismissed
    before = _step(ghost, "before_tab")
    assert ghost["shown_again"], ghost
    text = before["suggestion"]
    lines = text.split("\n")
    [mark] = before["marks"]
    first = lines[0] or None
    assert mark["virt_text"] == first and mark["virt_lines"] == lines[1:], before
    row, col = before["cursor"]
    assert before["lines"][row - 1] == "    " and col == 4, before
    after = _step(ghost, "accept_all")
    expected = [*before["lines"][: row - 1], "    " + lines[0], *lines[1:]]
    assert after["lines"] == expected, after
    assert after["cursor"] == [row + len(lines) - 1, len(after["lines"][-1])], after
    assert after["marks"] == [] and after["stats"]["accepted"] == 2, after


def test_tab_without_a_suggestion_is_a_tab(ghost: dict[str, Any]) -> None:
    step = _step(ghost, "plain_tab")
    assert step["lines"][-1] == "    x = 1", step  # Python's softtabstop: four spaces


def test_fimble_commands(ghost: dict[str, Any]) -> None:
    status = "\n".join(ghost["status"])
    assert "model.state: ready" in status and "enabled: true" in status, status
    assert re.search(r"neovim\.shown: [1-9]", status), status
    explain = "\n".join(ghost["explain"])
    assert "outcome: served" in explain and "trigger:" in explain, explain
    assert ghost["after_toggle"] is False and ghost["after_second_toggle"] is True, ghost


def test_completion_fallback_through_omnifunc(tmp_path: Path) -> None:
    setup = {"settings": SETTINGS, "ghost_text": False, "completion_autotrigger": False}
    data = run_scenario(tmp_path, "omnifunc", str(model_path(SMALL)), setup)
    assert data.get("error") is None and data["mode"] is False, data
    assert data["omnifunc"] == "v:lua.vim.lsp.omnifunc", data
    items = [i for i in data["items"] if i.get("menu") == "fimble" or "fimble" in str(i.get("info", ""))]
    assert items, data
    accepted = _step(data, "accepted")
    line = accepted["lines"][7]
    assert line.startswith("        dates.append(") and len(line) > len("        dates.append("), accepted
