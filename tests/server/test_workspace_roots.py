"""``WorkspaceIndexes``: which paths belong to a workspace folder, and which are secrets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fimble.indexer import IndexConfig
from fimble.server.index_runner import IndexRunner, NullIndex
from fimble.server.workspace_roots import WorkspaceIndexes


@pytest.fixture
def indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, WorkspaceIndexes]]:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "app.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "outside.py").write_text("x = 1\n")
    roots = WorkspaceIndexes(watch=False)
    roots.configure([ws], [])
    deadline = time.monotonic() + 60
    while not all(i.get("ready") for i in roots.stats()["indexes"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    yield ws, roots
    roots.close()


def test_dotdot_never_leaves_the_folder(indexes: tuple[Path, WorkspaceIndexes]) -> None:
    ws, roots = indexes
    assert roots._owner(ws / "pkg" / "app.py") is not None
    assert roots._owner("pkg/../pkg/app.py")[2] == "pkg/app.py"  # type: ignore[index]
    for escape in ("../outside.py", ws / ".." / "outside.py", f"{ws}/pkg/../../outside.py", ws.parent):
        assert roots._owner(escape) is None, escape
        assert not roots.context_for(str(escape), "x = ", "")


def test_secret_files_feed_no_context(indexes: tuple[Path, WorkspaceIndexes]) -> None:
    ws, roots = indexes
    for secret in (ws / ".env", ws / "pkg" / "server.pem", ws / "credentials.json", Path("/elsewhere/.env")):
        assert roots.is_secret(secret), secret
    assert not roots.is_secret(ws / "pkg" / "app.py")
    roots.note_edit(ws / ".env", "TOKEN=zqsecret\n", 0)
    roots.note_edit(ws / "pkg" / "app.py", "def helper():\n    return 2\n", 1)
    assert [c.path for c in roots.recent.chunks(exclude="")] == [str(ws / "pkg" / "app.py")]
    assert not roots.context_for(".env", "TOKEN=", "")


def test_the_folder_deny_list_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    from fimble.indexer import WorkspaceIndex

    (tmp_path / "ws").mkdir()
    with WorkspaceIndex.open(tmp_path / "ws", IndexConfig(deny=("private/",))) as ix:
        assert ix.is_secret("private/notes.py") and not ix.is_secret("public/notes.py")


def test_without_an_index_the_default_names_decide() -> None:
    runner = IndexRunner(NullIndex())
    assert runner.is_secret("/home/u/project/.env.local") and runner.is_secret("id_rsa")
    assert not runner.is_secret("/home/u/project/app.py") and not runner.is_secret(None)
