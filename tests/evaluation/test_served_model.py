"""`fimble eval --mode served` for real: a `fimble serve` process over LSP, the 0.5B model, a tiny repo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fimble.cli import cli
from tests.model_paths import SMALL, model_path

pytestmark = [pytest.mark.model, pytest.mark.slow]

SHAPES = """def rectangle_area(width, height):
    return width * height


def circle_area(radius):
    return 3.14159 * radius * radius
"""

APP = """from shapes import circle_area, rectangle_area


def house(width, height, radius):
    walls = rectangle_area(width, height)
    window = circle_area(radius)
    return walls - window
"""


def test_served_mode_asks_a_real_server_and_reports_per_request_and_visit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = model_path(SMALL)
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))  # (the eval's own index of the repo)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "shapes.py").write_text(SHAPES)
    (repo / "app.py").write_text(APP)
    out = tmp_path / "report"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(repo),
            "--samples",
            "2",
            "--seed",
            "1",
            "--model",
            str(gguf),
            "--think-ms",
            "0",
            "--max-tokens",
            "16",
            "--out",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert (repo / "shapes.py").read_text() == SHAPES and (repo / "app.py").read_text() == APP

    report = json.loads((out / "eval.json").read_text())
    assert report["meta"]["mode"] == "served" and "summaries" not in report  # no ceiling asked for
    served = report["served"]
    assert served["settings"]["think_ms"] == [0]
    assert served["settings"]["initialization_options"] == {"maxTokens": 16}
    rows = served["rows"]
    assert {r["request"] for r in rows} == {"automatic", "invoked"}
    assert {"cold", "revisited"} <= {r["visit"] for r in rows}
    assert len(rows) == 2 * (served["cases"] + served["revisits"])
    for r in rows:  # every answer went through the server: timed by the client, seen by fimble.status
        assert r["latency_ms"] > 0 and r["truth"].strip()
        assert r["server"]["trigger"] == r["request"] and r["server"]["outcome"]
        assert r["small_first_prompt"] in (True, False) and "error" not in r
    (run,) = served["runs"]
    assert run["index"][0]["ready"] and run["index"][0]["files"] == 2
    assert run["requests"]["requests"] >= len(rows)
    assert Path(run["log"]).exists()

    entries = {(e["request"], e["group"], e["visit"]): e for e in served["summary"]}
    first = entries[("automatic", "all", "first_pass")]
    assert first["n"] == served["cases"] and first["exact_match_ci95"] is not None
    assert first["latency_p50_ms"] > 0 and 0 <= first["empty_rate"] <= 1
    assert entries[("invoked", "all", "revisited")]["n"] == served["revisits"]

    cases = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert len(cases) == served["cases"] and {c["position"] for c in cases} <= {"line_start", "mid_line"}
    for c in cases:  # the masked file, the cursor and the truth give back the file as it is
        original = (repo / c["path"]).read_text()
        assert c["text"][: c["offset"]] + c["truth"] + c["text"][c["offset"] :] == original
        assert c["source"] == str(repo.resolve())
    assert "exact (95% CI)" in result.output and "cases.jsonl" in result.output
    assert "Served" in (out / "eval.html").read_text()
