"""walk(): what reaches the indexer, symlinks and loops included."""

from __future__ import annotations

import os
from pathlib import Path

from fimble.indexer.ignore import IgnoreRules
from fimble.indexer.walker import WalkStats, walk
from tests.indexer.conftest import SECRETS, write


def test_walk_fixture_workspace(workspace: Path) -> None:
    stats = WalkStats()
    entries = list(walk(workspace, IgnoreRules(workspace), max_bytes=1 << 20, stats=stats))
    rels = [e.rel for e in entries]
    assert len(set(rels)) == len(rels)
    assert rels == [
        e.rel for e in walk(workspace, IgnoreRules(workspace), max_bytes=1 << 20)
    ]  # deterministic
    assert "pyproj/pkg/models.py" in rels and "data/blob.txt" in rels  # binary is sniffed later
    assert not set(SECRETS) & set(rels)
    assert "big/huge.py" not in rels and stats.too_large == 1
    assert stats.secrets == len(SECRETS)
    assert stats.loops >= 1  # loop/again -> .. and sub_alias -> sub
    assert stats.symlinks_outside == 2  # outside_link/ and stolen_link.py
    assert not any(r.startswith(("loop/", "sub_alias/", "outside_link/")) for r in rels)
    entry = next(e for e in entries if e.rel == "pyproj/pkg/models.py")
    st = os.stat(entry.path)
    assert (entry.size, entry.mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_max_bytes_is_configurable(workspace: Path) -> None:
    rels = {e.rel for e in walk(workspace, IgnoreRules(workspace), max_bytes=6 << 20)}
    assert "big/huge.py" in rels


def test_symlink_inside_workspace_is_followed_once(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write(root, "real/a.py", "x = 1\n")
    os.symlink("real", root / "zlink")
    os.symlink("real/a.py", root / "b.py")
    rels = [e.rel for e in walk(root, IgnoreRules(root), max_bytes=1 << 20)]
    assert rels == ["b.py"]  # the link is met first (sorted); the same inode is not indexed twice


def test_deep_symlink_loop(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write(root, "a/b/c.py", "x = 1\n")
    os.symlink("../../a", root / "a" / "b" / "up")
    stats = WalkStats()
    rels = [e.rel for e in walk(root, IgnoreRules(root), max_bytes=1 << 20, stats=stats)]
    assert rels == ["a/b/c.py"] and stats.loops == 1


def test_unreadable_directory_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write(root, "ok.py", "x = 1\n")
    locked = root / "locked"
    write(root, "locked/x.py", "y = 2\n")
    locked.chmod(0)
    try:
        stats = WalkStats()
        rels = [e.rel for e in walk(root, IgnoreRules(root), max_bytes=1 << 20, stats=stats)]
        if os.geteuid() != 0:  # root reads everything
            assert rels == ["ok.py"] and stats.unreadable == ["locked"]
    finally:
        locked.chmod(0o755)
