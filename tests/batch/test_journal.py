"""The batch journal: what a SIGKILL can leave behind, and how the next run mends it."""

from __future__ import annotations

import json
from pathlib import Path

from fimble.batch import Journal


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_commit_journals_then_appends(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with Journal(out) as journal:
        journal.commit([{"id": "a", "text": "1"}, {"id": "b", "text": "2"}])
        journal.commit([{"id": "c", "text": "3"}])
        assert journal.done_ids() == {"a", "b", "c"}
        assert journal.repair() == 0
    assert [r["id"] for r in records(out)] == ["a", "b", "c"]
    with Journal(out) as again:  # reopened: the journal persisted
        assert again.done_ids() == {"a", "b", "c"}


def test_repair_cuts_a_torn_line_and_restores_what_the_journal_holds(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with Journal(out) as journal:
        journal.commit([{"id": "a", "text": "1"}, {"id": "b", "text": "2"}])
    # Killed while appending the next group, after its journal commit: a torn line, a missing record.
    with Journal(out) as journal, journal._env.begin(db=journal._done, write=True) as txn:
        txn.put(b"c", json.dumps({"id": "c", "text": "3"}).encode())
    with open(out, "a") as f:
        f.write('{"id": "c", "te')
    with Journal(out) as journal:
        assert journal.repair() == 2  # the torn line dropped, record c appended
        assert journal.repair() == 0
    assert [r["id"] for r in records(out)] == ["a", "b", "c"]


def test_repair_drops_lines_the_journal_does_not_know_and_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": "stray"}\n')
    with Journal(out) as journal:
        journal.commit([{"id": "a", "text": "1"}])
        with open(out, "a") as f:
            f.write('{"id": "a", "text": "1"}\n')
        assert journal.repair() == 2
    assert records(out) == [{"id": "a", "text": "1"}]
