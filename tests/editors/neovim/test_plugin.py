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
    """What accept-word takes (as lua/fimble/text.lua): blanks, then a word or a run of punctuation."""
    m = re.match(r"\s*[A-Za-z0-9_]+", text) or re.match(r"\s*[^A-Za-z0-9_\s]+", text)
    return m.group(0) if m else text


def _next_line(text: str) -> str:
    """What accept-line takes: the rest of the line, or the next line when the text starts one."""
    first, nl, rest = text.partition("\n")
    if not nl:
        return text
    if first.strip():
        return first
    return first + nl + rest.split("\n", 1)[0]


def _insert(lines: list[str], cursor: list[int], text: str) -> tuple[list[str], list[int]]:
    """``lines`` with ``text`` typed at ``cursor`` ([row 1-based, byte column]), and the new cursor."""
    row, col = cursor
    line = lines[row - 1].encode()
    head, tail = line[:col].decode(), line[col:].decode()
    new = (head + text + tail).split("\n")
    last = (head + text).split("\n")[-1]
    return lines[: row - 1] + new + lines[row:], [row + text.count("\n"), len(last.encode())]


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
    assert shown["cursor"] == [8, len("        dates.append(")], shown
    text = shown["suggestion"]
    assert text and text.strip(), shown
    first, *others = text.split("\n")
    [mark] = shown["marks"]
    # The first line is inline virtual text at the cursor, the others virtual lines below, drawn in
    # the plugin's highlight group.
    assert (mark["row"], mark["col"]) == (7, len("        dates.append(")), mark
    assert mark["virt_text"] == (first or None) and mark["virt_lines"] == others, mark
    assert mark["virt_text_pos"] == ("inline" if first else None), mark
    assert mark["hl"] == ("FimbleSuggestion" if first else None), mark
    assert shown["stats"]["requests"] >= 1 and shown["stats"]["shown"] == 1, shown


def test_accept_word_then_line(ghost: dict[str, Any]) -> None:
    shown = _step(ghost, "shown")
    text = shown["suggestion"]
    word = _next_word(text)
    lines, cursor = _insert(shown["lines"], shown["cursor"], word)
    after_word = _step(ghost, "accept_word")
    assert after_word["lines"] == lines and after_word["cursor"] == cursor, (word, after_word)
    rest = text[len(word) :]
    if rest:  # the rest stays shown, right at the cursor
        assert after_word["suggestion"] == rest, after_word
        [mark] = after_word["marks"]
        assert [mark["row"] + 1, mark["col"]] == cursor, after_word
        assert mark["virt_text"] == (rest.split("\n")[0] or None), after_word
    else:
        assert after_word["marks"] == [] and after_word["suggestion"] is None, after_word
        return
    part = _next_line(rest)
    lines, cursor = _insert(lines, cursor, part)
    after_line = _step(ghost, "accept_line")
    assert after_line["lines"] == lines and after_line["cursor"] == cursor, (part, after_line)
    assert after_line["mode"] == "i", after_line
    remaining = rest[len(part) :]
    assert after_line["suggestion"] == (remaining or None), after_line
    assert len(after_line["marks"]) == (1 if remaining else 0), after_line


def test_multiline_suggestion_dismiss_and_accept(ghost: dict[str, Any]) -> None:
    # A suggestion for the new function's body; dismissing hides it; asked again, the whole of it
    # goes in with <Tab>.
    assert ghost["shown_new_line"], ghost
    assert len(_step(ghost, "new_line")["marks"]) == 1, ghost
    dismissed = _step(ghost, "dismissed")
    assert dismissed["marks"] == [] and dismissed["suggestion"] is None, dismissed
    before = _step(ghost, "before_tab")
    assert ghost["shown_again"], ghost
    assert before["stats"]["cancelled"] >= dismissed["stats"]["cancelled"] + 1, (dismissed, before)
    text = before["suggestion"]
    lines = text.split("\n")
    [mark] = before["marks"]
    first = lines[0] or None
    assert mark["virt_text"] == first and mark["virt_lines"] == lines[1:], before
    row, col = before["cursor"]
    assert before["lines"][row - 1] == "    " and col == 4, before
    after = _step(ghost, "accept_all")
    expected, cursor = _insert(before["lines"], before["cursor"], text)
    assert after["lines"] == expected and after["cursor"] == cursor, after
    assert after["marks"] == [] and after["stats"]["accepted"] >= 1, after


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
    # :Fimble explain! — the CLI's account of the prompt for the cursor, with the server's model.
    cursor = "".join(ghost["explain_cursor"] or [])  # the terminal wraps long lines
    assert "dates.py:8:1" in cursor and "qwen2.5-coder-0.5b" in cursor, cursor
    assert "prefix" in cursor and "suffix" in cursor and "suggestion:" in cursor, cursor


def test_completion_fallback_through_omnifunc(tmp_path: Path) -> None:
    setup = {"settings": SETTINGS, "ghost_text": False, "completion_autotrigger": False}
    data = run_scenario(tmp_path, "omnifunc", str(model_path(SMALL)), setup)
    assert data.get("error") is None and data["mode"] is False, data
    assert data["omnifunc"] == "v:lua.vim.lsp.omnifunc", data
    items = [i for i in data["items"] if "fimble" in i.get("menu", "")]
    assert len(items) == 1, data
    lsp_item = items[0]["user_data"]["nvim"]["lsp"]["completion_item"]
    assert lsp_item["labelDetails"]["description"] == "fimble" and lsp_item["sortText"] == "!fimble", lsp_item
    # The whole suggestion goes in, not only its first word (what Neovim inserts for a plain item).
    accepted = _step(data, "accepted")
    expected = "        dates.append(" + lsp_item["textEdit"]["newText"]
    assert accepted["lines"][7] == expected.split("\n")[0], accepted
    assert "\n".join(accepted["lines"][7:]).startswith(expected), accepted


def test_the_place_the_cursor_rests_is_warmed_before_asking(tmp_path: Path) -> None:
    data = run_scenario(tmp_path, "focus", str(model_path(SMALL)), {"settings": SETTINGS})
    assert data.get("error") is None and data["warmed"], data
    assert data["before"]["requests"] == 0, data["before"]  # no keystroke asked: the focus did it
    asked = _step(data, "asked")
    assert data["shown"] and asked["suggestion"], data
    last = data["after"]["last"]["engine"]
    assert last["stop_reason"] in ("typed_through", "cached", "adopted"), last
    assert data["after"]["requests"]["completed"] == 1, data["after"]["requests"]
