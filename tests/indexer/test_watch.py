"""The watchdog observer keeps a running index fresh (real inotify events, debounced)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fimble.indexer import IndexConfig, WorkspaceIndex
from tests.indexer.conftest import write


def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("the index did not catch up with the file system")


@pytest.fixture
def watched(workspace: Path, config: IndexConfig) -> Iterator[WorkspaceIndex]:
    ix = WorkspaceIndex.open(workspace, config)
    try:
        ix.start(watch=True)
        eventually(lambda: ix.stats().ready)
        yield ix
    finally:
        ix.close()


def _paths(ix: WorkspaceIndex, name: str) -> list[str]:
    return [d.path for d in ix.definitions(name)]


def test_edit_create_delete_rename(watched: WorkspaceIndex, workspace: Path) -> None:
    write(workspace, "pyproj/fresh.py", "def fresh_function(): pass\n")
    eventually(lambda: _paths(watched, "fresh_function") == ["pyproj/fresh.py"])

    models = workspace / "pyproj/pkg/models.py"
    models.write_text(models.read_text().replace("def make_user(", "def create_user("))
    eventually(lambda: _paths(watched, "create_user") == ["pyproj/pkg/models.py"])
    assert watched.definitions("make_user") == ()

    (workspace / "pyproj/fresh.py").rename(workspace / "pyproj/renamed.py")
    eventually(lambda: _paths(watched, "fresh_function") == ["pyproj/renamed.py"])

    (workspace / "pyproj/renamed.py").unlink()
    eventually(lambda: _paths(watched, "fresh_function") == [])


def test_secrets_and_ignored_files_stay_out(watched: WorkspaceIndex, workspace: Path) -> None:
    write(workspace, ".env.development", "TOKEN = zqwatchsecret\n")
    write(workspace, "leak.log", "def zqwatchlog(): pass\n")
    write(workspace, "node_modules/new/index.js", "function zqwatchnode() {}\n")
    write(workspace, "pyproj/marker.py", "def watch_marker(): pass\n")  # processed after the others
    eventually(lambda: bool(_paths(watched, "watch_marker")))
    assert watched.search("zqwatchsecret") == ()
    assert watched.definitions("zqwatchlog") == () and watched.definitions("zqwatchnode") == ()


def test_directory_removed(watched: WorkspaceIndex, workspace: Path) -> None:
    assert _paths(watched, "Strings")
    shutil.rmtree(workspace / "javaproj")
    eventually(lambda: _paths(watched, "Strings") == [] and _paths(watched, "App") == ["web/src/app.tsx"])


def test_directory_moved_in(watched: WorkspaceIndex, workspace: Path, tmp_path: Path) -> None:
    write(tmp_path / "staging", "lib/moved.py", "def moved_in(): pass\n")
    (tmp_path / "staging" / "lib").rename(workspace / "movedlib")
    eventually(lambda: _paths(watched, "moved_in") == ["movedlib/moved.py"])


def test_gitignore_change_rescans(watched: WorkspaceIndex, workspace: Path) -> None:
    assert _paths(watched, "Greeter") == ["web/lib/helpers.js"]
    with (workspace / ".gitignore").open("a") as fh:
        fh.write("web/lib/\n")
    eventually(lambda: _paths(watched, "Greeter") == [])


def test_buffer_pushes_coalesce(watched: WorkspaceIndex) -> None:
    for i in range(50):
        watched.update_buffer("pyproj/typing.py", f"def typed_{i}(): pass\n")
    assert watched.flush(15)
    assert _paths(watched, "typed_49") == ["pyproj/typing.py"]
    assert watched.definitions("typed_10") == ()
