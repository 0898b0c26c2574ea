"""BM25 ranking over text windows (a small synthetic workspace)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from fimble.indexer import IndexConfig, WorkspaceIndex
from fimble.indexer.bm25 import idf
from tests.indexer.conftest import write


def _index(tmp_path: Path, files: dict[str, str]) -> WorkspaceIndex:
    root = tmp_path / "ws"
    for rel, text in files.items():
        write(root, rel, text)
    ix = WorkspaceIndex.open(root, IndexConfig(workers=0, window_stride_lines=4))
    ix.build()
    return ix


def test_idf_prefers_rare_terms() -> None:
    assert idf(1000, 1) > idf(1000, 100) > idf(1000, 900) > 0


def test_rare_and_repeated_terms_rank_first(tmp_path: Path) -> None:
    filler = "".join(f"common_word filler_{i}\n" for i in range(40))
    with _index(
        tmp_path,
        {
            "a.txt": filler + "rare_token rare_token rare_token\n",
            "b.txt": filler + "rare_token\n",
            "c.txt": filler,
        },
    ) as ix:
        hits = ix.search("rare_token common_word", k=3)
        assert [h.path for h in hits[:2]] == ["a.txt", "b.txt"]
        assert hits[0].score > hits[1].score
        assert "rare_token" in hits[0].text


def test_windows_do_not_overlap_and_k_is_respected(tmp_path: Path) -> None:
    text = "".join(f"needle line {i}\n" for i in range(60))
    with _index(tmp_path, {"long.txt": text}) as ix:
        hits = ix.search("needle", k=5)
        assert len(hits) == 5
        spans = sorted((h.start_line, h.end_line) for h in hits)
        assert all(a[1] < b[0] for a, b in pairwise(spans))
        for h in hits:
            lines = text.split("\n")[h.start_line : h.end_line + 1]
            assert h.text == "\n".join(lines) + "\n"  # the window's exact lines, 8 of them
            assert h.end_line - h.start_line + 1 <= 8


def test_exclude_only_drops_overlapping_windows(tmp_path: Path) -> None:
    text = "".join(f"needle line {i}\n" for i in range(40))
    with _index(tmp_path, {"f.txt": text}) as ix:
        hits = ix.search("needle", k=10, exclude=("f.txt", (0, 15)))
        assert hits and all(h.start_line > 15 for h in hits)


def test_unknown_terms_and_empty_index(tmp_path: Path) -> None:
    with _index(tmp_path, {"x.txt": "hello world\n"}) as ix:
        assert ix.search("absent_term_zz") == ()
        assert ix.search("hello", k=0) == ()
    with _index(tmp_path / "e", {"empty.txt": ""}) as ix:
        assert ix.search("anything") == ()


def test_windows_found_by_bisection_are_those_of_the_full_list() -> None:
    """_overlapping and _window bisect or index the blocks; they must agree with the windows
    listed one by one."""
    import random

    from fimble.indexer.bm25 import _overlapping, _window, _windows

    rng = random.Random(3)
    for _ in range(300):
        blocks, line, byte = [], 0, 0
        for _ in range(rng.randrange(0, 9)):
            lines, size = rng.randrange(1, 5), rng.randrange(1, 90)
            blocks.append((line, line + lines, byte, byte + size))
            line, byte = line + lines, byte + size
        first = rng.randrange(0, line + 3)
        last = first + rng.randrange(0, 12)
        windows = _windows(blocks)
        expected = [w for w, (start, end, _, _) in enumerate(windows) if start <= last and end >= first]
        if expected and expected[-1] == len(windows) - 1:
            expected.append(len(windows))
        assert _overlapping(blocks, first, last) == expected
        for w in range(len(windows) + 2):
            if windows:
                assert _window(blocks, w) == windows[min(w, len(windows) - 1)]
