"""Masking: which lines are candidates, where the cursor goes, what the model sees and must produce."""

from __future__ import annotations

import random

from fimble.evaluation.samples import Sample, candidate_lines, choose_samples, mask, mid_line_column

CODE = '''import os

def join(a, b):
    """Join two paths.

    Long prose here.
    """
    # a comment line
    result = os.path.join(a, b)
    return result
'''


def test_candidates_skip_blank_comment_docstring_and_trivial_lines() -> None:
    lines = CODE.split("\n")
    picked = [lines[i].strip() for i in candidate_lines(CODE)]
    assert picked == ["import os", "def join(a, b):", "result = os.path.join(a, b)", "return result"]


def test_mask_removes_the_rest_of_the_line_only() -> None:
    s = Sample("m.py", 8, 13, "mid_line", "os.path.join(a, b)")
    text, offset = mask(CODE, s)
    assert text[:offset].endswith("    result = ")
    assert text[offset:].startswith("\n    return result")
    assert "os.path.join" not in text
    assert text.count("\n") == CODE.count("\n")  # line numbers stay put


def test_mask_first_and_last_line() -> None:
    text, offset = mask("abc def\nxyz", Sample("m.py", 0, 4, "mid_line", "def"))
    assert (text, offset) == ("abc \nxyz", 4)
    text, offset = mask("abc\nxyz = 1", Sample("m.py", 1, 0, "line_start", "xyz = 1"))
    assert (text, offset) == ("abc\n", 4)


def test_mid_line_column_is_a_token_boundary_with_text_left() -> None:
    line = "    result = os.path.join(a, b)"
    rng = random.Random(0)
    for _ in range(20):
        c = mid_line_column(line, rng)
        assert c is not None and line[c - 1] in " .(=,[" and len(line) - c >= 3
        assert c > 4  # after the indentation and the first character of code
    assert mid_line_column("    pass", rng) is None


def test_choose_samples_is_seeded_ordered_and_mixes_cursor_kinds() -> None:
    files = [("a.py", CODE), ("b.py", CODE.replace("result", "value"))]
    one = choose_samples(files, 6, seed=3)
    assert one == choose_samples(files, 6, seed=3)
    assert one != choose_samples(files, 6, seed=4)
    assert [(s.path, s.line) for s in one] == sorted((s.path, s.line) for s in one)
    assert {s.kind for s in one} == {"line_start", "mid_line"}
    for s in one:
        line = dict(files)[s.path].split("\n")[s.line]
        assert line[s.column :].rstrip() == s.truth and s.truth.strip()


def test_choose_samples_draws_the_cross_file_share() -> None:
    files = [(f"f{i}.py", CODE) for i in range(5)]

    def classify(s: Sample) -> list[str]:
        return ["join"] if "join" in s.truth else []

    chosen = choose_samples(files, 6, seed=1, classify=classify, cross_share=0.5)
    assert len(chosen) == 6
    cross = [s for s in chosen if s.cross_file]
    assert len(cross) == 3 and all(s.cross_file == ("join",) for s in cross)
