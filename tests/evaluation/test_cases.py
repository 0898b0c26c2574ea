"""Served cases: two positions per line, masked as the server sees them, labelled by visit."""

from __future__ import annotations

from fimble.evaluation.cases import build_cases, case_record, positions_of, revisit_plan
from fimble.evaluation.samples import Sample

A = """import os


def join(a, b):
    result = os.path.join(a, b)
    return result
"""
B = "def only():\n    value = compute(1, 2)\n    return value\n"


def test_a_line_start_sample_gets_a_mid_line_position_too() -> None:
    sample = Sample("a.py", 4, 4, "line_start", "result = os.path.join(a, b)")
    start, mid = positions_of(sample, A, "python", seed=3)
    assert (start.position, start.column, start.truth) == ("line_start", 4, "result = os.path.join(a, b)")
    assert start.text.split("\n")[4] == "    " and start.text[start.offset :].startswith("\n    return")
    assert start.ceiling and not mid.ceiling
    assert mid.position == "mid_line" and mid.column > 4 and A.split("\n")[4][mid.column :] == mid.truth
    assert mid.text.split("\n")[4] == A.split("\n")[4][: mid.column]
    assert mid.text[: mid.offset].endswith(A.split("\n")[4][: mid.column])
    assert mid.text.count("\n") == A.count("\n")  # line numbers stay put
    # the drawn column depends on the seed and the line only
    again = positions_of(sample, A, "python", seed=3)[1]
    assert again.column == mid.column


def test_a_mid_line_sample_keeps_its_column_and_is_classified_per_position() -> None:
    sample = Sample("a.py", 4, 13, "mid_line", "os.path.join(a, b)")
    seen: list[tuple[str, int, int]] = []

    def classify(path: str, line: int, column: int) -> list[str]:
        seen.append((path, line, column))
        return ["result"] if column < 13 else []

    start, mid = positions_of(sample, A, "python", classify)
    assert seen == [("a.py", 4, 4), ("a.py", 4, 13)]
    assert (mid.column, mid.ceiling, mid.truth) == (13, True, "os.path.join(a, b)")
    assert start.cross_file == ("result",) and start.cross_file_unseen == ("result",) and mid.cross_file == ()
    assert start.id == "a.py:5:5" and start.sample == mid.sample == "a.py:5:14"


def test_a_line_with_nowhere_to_stop_mid_line_gives_one_position() -> None:
    text = "x = 1\n    finish\n"
    cases = positions_of(Sample("m.py", 1, 4, "line_start", "finish"), text, "python")
    assert [c.position for c in cases] == ["line_start"]


def test_cases_follow_the_files_and_the_first_in_each_file_is_cold() -> None:
    samples = [
        Sample("b.py", 1, 4, "line_start", "value = compute(1, 2)"),
        Sample("a.py", 5, 4, "line_start", "return result"),
        Sample("a.py", 4, 13, "mid_line", "os.path.join(a, b)"),
    ]
    cases = build_cases(samples, {"a.py": A, "b.py": B}, {"a.py": "python", "b.py": "python"}, seed=1)
    assert [(c.path, c.line, c.position) for c in cases] == [
        ("a.py", 4, "line_start"),
        ("a.py", 4, "mid_line"),
        ("a.py", 5, "line_start"),
        ("a.py", 5, "mid_line"),
        ("b.py", 1, "line_start"),
        ("b.py", 1, "mid_line"),
    ]
    assert [c.visit for c in cases] == ["cold", "warm", "warm", "warm", "cold", "warm"]
    again = revisit_plan(cases)  # each file's first position, and one of the 4 warm ones
    assert [(c.path, c.line, c.position) for c in again] == [
        ("a.py", 4, "line_start"),
        ("a.py", 4, "mid_line"),
        ("b.py", 1, "line_start"),
    ]
    assert {c.visit for c in again} == {"revisited"} and again[0].text == cases[0].text  # the same mask
    assert [c.path for c in revisit_plan(cases, extra=0)] == ["a.py", "b.py"]


def test_a_case_record_holds_what_another_system_needs_to_answer() -> None:
    case = positions_of(Sample("a.py", 4, 13, "mid_line", "os.path.join(a, b)"), A, "python")[1]
    record = case_record(case, "demo==1.0", 7, True)
    assert record["source"] == "demo==1.0" and record["order"] == 7 and record["revisited"]
    where = (record["path"], record["line"], record["column"], record["position"])
    assert where == ("a.py", 4, 13, "mid_line")
    assert record["text"][: record["offset"]] + record["truth"] + record["text"][record["offset"] :] == A
    assert record["cross_file"] is False and record["language"] == "python"
