"""Small prompt start lines: bounded, saved beside the KV states, read back by the next process."""

from __future__ import annotations

from pathlib import Path

from fimble.completion.starts import FILE_NAME, StartLines


def test_start_lines_survive_a_restart_and_stay_bounded(tmp_path: Path) -> None:
    first = StartLines(limit=2)
    first.attach(tmp_path)
    first.put("a.py", 40)
    first.put("b.py", 7)
    first.put("c.py", 12)  # over the limit: a.py, the oldest, goes
    assert first.get("a.py") is None and first.get("c.py") == 12
    later = StartLines(limit=2)
    later.put("b.py", 9)  # set in this process before the directory was known: it wins
    later.attach(tmp_path)
    assert later.get("b.py") == 9 and later.get("c.py") == 12


def test_a_missing_torn_or_unwritable_file_only_loses_hints(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text('{"a.py": 4', encoding="utf-8")  # torn
    lines = StartLines()
    lines.attach(tmp_path)
    assert lines.get("a.py") is None
    (tmp_path / FILE_NAME).write_text('{"a.py": "x", "b.py": 3, "c.py": -1}', encoding="utf-8")
    fresh = StartLines()
    fresh.attach(tmp_path)
    assert fresh.get("a.py") is None and fresh.get("b.py") == 3 and fresh.get("c.py") is None
    gone = StartLines()
    gone.attach(tmp_path / "missing")  # the directory cannot be written: memory only
    gone.put("a.py", 1)
    assert gone.get("a.py") == 1
