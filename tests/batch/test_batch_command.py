"""`fimble batch` for real: the command in a subprocess with the 0.5B model, killed and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.model_paths import SMALL, model_path

EXAMPLE = Path(__file__).parents[2] / "fimble" / "examples" / "dates.py"


def requests(n: int) -> list[str]:
    lines = [
        json.dumps({"id": "pos", "path": str(EXAMPLE), "line": 8, "col": 22}),
        json.dumps(
            {"id": "plain", "prompt": "# a Python function that adds two numbers\ndef add(", "max_tokens": 12}
        ),
        "this line is not JSON",
    ]
    for i in range(n):
        prefix = f"def square_{i}(x):\n    return "
        lines.append(json.dumps({"id": f"fim{i}", "prefix": prefix, "suffix": "\n", "max_tokens": 8}))
    return lines


def batch(inp: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    model_path(SMALL)  # fails with the command that fetches it when `make models` was skipped
    return subprocess.Popen(
        [sys.executable, "-m", "fimble", "batch", str(inp), "-o", str(out), "-m", SMALL, "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def records(out: Path) -> dict[str, dict[str, object]]:
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len({r["id"] for r in rows}), "an id was answered twice"
    return {r["id"]: r for r in rows}


@pytest.mark.model
@pytest.mark.slow
def test_batch_answers_every_line_and_resumes_after_sigkill(tmp_path: Path) -> None:
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(requests(12)) + "\n")

    whole = tmp_path / "whole.jsonl"
    proc = batch(inp, whole, "--width", "1")
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert (summary["total"], summary["done"], summary["errors"]) == (15, 14, 1)
    expected = records(whole)
    assert expected["pos"]["text"] == "dt.date(year, month, day)"
    assert expected["line:3"]["error"]
    assert all(expected[f"fim{i}"]["text"] for i in range(12))

    # The same run at the width chosen for this machine (``--width auto``, the default: the
    # throughput curve is measured on the first run), killed once a few records are out, then run
    # again: the same records, once each.
    killed = tmp_path / "killed.jsonl"
    proc = batch(inp, killed)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if killed.exists() and len(killed.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    before = len(killed.read_text().splitlines())
    proc = batch(inp, killed, "--width", "4")
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    resumed = json.loads(stdout)
    assert (
        resumed["skipped"] >= min(before, 4)
        and resumed["skipped"] + resumed["done"] + resumed["errors"] == 15
    )
    got = records(killed)
    assert set(got) == set(expected)
    # Decoded four at a time: the same answers, except where a near-tie was counted.
    differ = [k for k in got if got[k].get("text") != expected[k].get("text")]
    assert all(got[k].get("near_ties") for k in differ), differ


def test_a_width_llama_cpp_cannot_hold_is_refused_before_loading_a_model(tmp_path: Path) -> None:
    """Each request is a KV sequence and the editor's slot takes two of llama.cpp's 256."""
    from click.testing import CliRunner

    from fimble.commands.batch import MAX_WIDTH
    from fimble.commands.batch import batch as command

    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": 1, "prompt": "x"}\n')
    result = CliRunner().invoke(
        command, [str(inp), "-o", str(tmp_path / "out.jsonl"), "--width", str(MAX_WIDTH + 1)]
    )
    assert result.exit_code == 2 and "--width" in result.output
    assert MAX_WIDTH + 2 == 256
