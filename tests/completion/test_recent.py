"""Recently edited and visited regions: merging, order, limits, what the prompt is shown."""

from __future__ import annotations

from fimble.completion.context.gather import ContextGatherer
from fimble.completion.context.recent import RecentRegions

DOC = "\n".join(f"line{i} = {i}" for i in range(100))


def test_newest_first_merged_and_limited() -> None:
    r = RecentRegions(limit=2, radius=1, merge_lines=5)
    r.edited("/w/a.py", DOC, 10)
    r.visited("/w/b.py", DOC, 50)
    r.visited("/w/a.py", DOC, 12)  # near the edit: the same region, now newest, still "edited"
    chunks = r.chunks()
    assert [(c.path, c.reason) for c in chunks] == [
        ("/w/a.py", "recently edited (lines 12-14)"),
        ("/w/b.py", "recently visited (lines 50-52)"),
    ]
    assert chunks[0].text == "line11 = 11\nline12 = 12\nline13 = 13"
    r.edited("/w/c.py", DOC, 0)
    assert [c.path for c in r.chunks()] == ["/w/c.py", "/w/a.py"]


def test_the_current_file_and_unknown_paths_are_left_out() -> None:
    r = RecentRegions()
    r.edited("/w/a.py", DOC, 3)
    r.edited("/elsewhere/x.py", DOC, 3)
    rel = {"/w/a.py": "a.py"}
    assert r.chunks(exclude="a.py", shown=rel.get) == []
    assert [c.path for c in r.chunks(exclude="b.py", shown=rel.get)] == ["a.py"]
    r.forget("/w/a.py")
    assert r.chunks(shown=rel.get) == []


def test_the_gatherer_takes_recent_regions_and_stays_sticky() -> None:
    from tests.completion.test_context import index

    r = RecentRegions()
    r.edited("notes.py", "TODO = ['ship it']", 0)
    g = ContextGatherer(index(), recent=lambda path: r.chunks(exclude=path))
    first = g.chunks("app.py", "x = parse(s)\n", 0)
    assert ("notes.py", "recently edited (lines 1-1)") in [(c.path, c.reason) for c in first]
    r.edited("other.py", "y = 2", 0)
    assert g.chunks("app.py", "x = parse(s)\n", 3) is first  # same region: token for token the same
