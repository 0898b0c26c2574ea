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


def _workspace_texts() -> dict[str, str]:
    texts = {}
    for n in range(6):
        lines = [f"def helper_{n}_{i}(value, other_{i % 3}):" for i in range(12)]
        lines += [f"    return shared_name + value * {i} + token_{n % 3}" for i in range(n + 3)]
        texts[f"m{n}.py"] = "\n".join(lines) + "\n"
    return texts


def _scores(hits: tuple) -> dict[tuple[str, int, int], float]:
    """Window -> score. Compared as a mapping: equal scores may come in another order, as files
    get other fids in an edited index than in a fresh one."""
    return {(h.path, h.start_line, h.end_line): h.score for h in hits}


def _assert_same_scores(got: tuple, want: tuple) -> None:
    got_scores, want_scores = _scores(got), _scores(want)
    assert got_scores.keys() == want_scores.keys()
    for window, score in want_scores.items():
        assert abs(got_scores[window] - score) <= 1e-3, (window, got_scores[window], score)


_QUERIES = (
    "shared_name token_1 value",
    "helper_2 other_1",
    "edited_word shared_name",
    "return value token_0",
)


def test_replaced_versions_do_not_change_scores(tmp_path: Path) -> None:
    """Stale postings of replaced versions (kept until compaction) must not count in document
    frequencies: an edited index scores exactly like a fresh index of the same content, as
    ``fimble eval`` (which masks and restores a line per sample) relies on."""
    texts = _workspace_texts()
    final = {**texts, "m1.py": texts["m1.py"] + "edited_word shared_name token_1\n"}
    with _index(tmp_path / "fresh", final) as fresh:
        want = {q: fresh.search(q, k=50) for q in _QUERIES}
    with _index(tmp_path / "edited", texts) as ix:
        root = tmp_path / "edited" / "ws"
        ix.update_buffer(root / "m1.py", "shared_name edited_word\n" * 30)
        ix.flush()
        ix.update_buffer(root / "m2.py", texts["m2.py"] + "x = 1\n")
        ix.flush()
        ix.update_buffer(root / "m2.py", texts["m2.py"])  # back to the original content
        ix.update_buffer(root / "m1.py", final["m1.py"])
        ix.flush()
        assert ix.stats().stale_versions >= 3  # the stale entries are still in the segments
        for q in _QUERIES:
            _assert_same_scores(ix.search(q, k=50), want[q])


def test_budget_counts_live_entries_only(tmp_path: Path) -> None:
    """The entry budget drops the most common terms first; which ones is decided on live entries, as
    in a fresh index, not on entries a replaced version left behind."""
    from fimble.indexer import bm25

    texts = {f"f{i}.txt": f"alpha_{i} beta\n" * 4 + "gamma\n" for i in range(8)}
    with _index(tmp_path / "fresh", texts) as fresh, fresh._store.read() as txn:
        want = bm25.search(txn, fresh._store.db, "gamma beta", k=20, budget=12)
    with _index(tmp_path / "edited", texts) as ix:
        root = tmp_path / "edited" / "ws"
        for text in ("gamma\n" * 200, texts["f0.txt"]):  # many gamma entries, then replaced again
            ix.update_buffer(root / "f0.txt", text)
            ix.flush()
        with ix._store.read() as txn:
            got = bm25.search(txn, ix._store.db, "gamma beta", k=20, budget=12)
    assert want
    _assert_same_scores(got, want)


def test_stale_entries_match_a_plain_mask() -> None:
    """_stale flags entries with one bitmap lookup and counts them with a cumulative sum; it must
    agree with a plain isin, part by part and term by term."""
    import random

    import numpy as np

    from fimble.indexer.bm25 import _stale

    rng = random.Random(5)
    for _ in range(200):
        found = {}
        for term in range(rng.randrange(1, 5)):
            parts = []
            for _ in range(rng.randrange(1, 4)):
                n = rng.randrange(1, 12)
                fids = np.sort(np.asarray([rng.randrange(1, 40) for _ in range(n)], np.uint32))
                parts.append(
                    (fids, np.arange(n, dtype=np.uint16), np.ones(n, np.uint16), np.ones(n, np.uint16))
                )
            found[term * 3] = parts
        dead = np.unique(np.asarray([rng.randrange(1, 40) for _ in range(rng.randrange(0, 10))], np.uint32))
        live, flags = _stale(found, dead)
        for term, parts in found.items():
            want = np.concatenate([np.isin(p[0], dead) for p in parts])
            assert live[term] == len(want) - int(want.sum())
            if want.any():
                assert np.array_equal(flags[term].astype(bool), want)
            else:
                assert term not in flags
