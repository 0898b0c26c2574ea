"""Acceptance log: local JSONL lines, rates, and one reported failure when the file is unwritable."""

from __future__ import annotations

import json
from pathlib import Path

from fimble.server.acceptance import AcceptanceLog, Served, summarize


def _served(sid: str) -> Served:
    return Served(sid, "inline", "python", "automatic", chars=12, lines=1, model="m", latency_ms=80.0)


def test_events_are_logged_as_json_lines_without_code(tmp_path: Path) -> None:
    log = AcceptanceLog(tmp_path / "a" / "acceptance.jsonl")
    assert log.served(_served("s1")) is None
    assert log.served(_served("s2")) is None
    assert log.event("shown", "s1") is None
    assert log.event("shown", "s2") is None
    assert log.event("accepted", "s1") is None
    assert log.event("partial", "s2", accepted_chars=4) is None
    lines = (tmp_path / "a" / "acceptance.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["event"] for e in entries] == ["served", "served", "shown", "shown", "accepted", "partial"]
    assert entries[4]["language"] == "python" and entries[4]["chars"] == 12  # enriched from "served"
    assert entries[5]["accepted_chars"] == 4
    assert all("text" not in e for e in entries)
    assert summarize(lines) == {"served": 2, "shown": 2, "accepted": 1, "partial": 1, "acceptance_rate": 0.5}
    assert log.counts()["served"] == 2


def test_rate_falls_back_to_served_when_clients_never_report_shown() -> None:
    lines = [json.dumps({"event": "served", "id": "a"}), json.dumps({"event": "accepted", "id": "a"}), "junk"]
    assert summarize(lines)["acceptance_rate"] == 1.0


def test_unwritable_log_reports_once_then_stays_quiet(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    log = AcceptanceLog(blocker / "acceptance.jsonl")
    err = log.served(_served("s1"))
    assert err is not None and "FIMBLE_HOME" in str(err)
    assert log.event("accepted", "s1") is None


def test_disabled_log_writes_nothing(tmp_path: Path) -> None:
    log = AcceptanceLog(tmp_path / "acceptance.jsonl", enabled=False)
    log.served(_served("s1"))
    assert not (tmp_path / "acceptance.jsonl").exists()
