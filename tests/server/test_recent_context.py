"""Recently edited regions reach the prompt's context through the server's real index hook
(tree-sitter, LMDB), and the LSP sync handler reports edits to it."""

from __future__ import annotations

import time
from pathlib import Path

from fimble.server.index_runner import IndexRunner
from fimble.server.workspace_roots import WorkspaceIndexes

GEOMETRY = "def rectangle_area(width, height):\n    return width * height\n"
APP = "from shapes import rectangle_area\n\n\ndef total(rooms):\n    return sum(\n"


def _ready(hook: WorkspaceIndexes, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        indexes = hook.stats().get("indexes", [])
        if indexes and all(i.get("ready") for i in indexes):  # type: ignore[union-attr]
            return
        time.sleep(0.05)
    raise AssertionError("index not ready")


def test_an_unsaved_edit_elsewhere_is_context_with_its_reason(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "shapes.py").write_text(GEOMETRY)
    (root / "app.py").write_text(APP)
    hook = WorkspaceIndexes(watch=False)
    try:
        hook.configure([root], [])
        _ready(hook)
        edited = GEOMETRY + "\n\ndef triangle_area(base, height):\n    return base * height / 2\n"
        IndexRunner(hook).note_edit(root / "shapes.py", edited, 3)
        chunks = hook.context_for(str(root / "app.py"), APP, "")
        recent = [c for c in chunks if c[2].startswith("recently edited")]
        assert recent and recent[0][0] == "shapes.py" and "triangle_area" in recent[0][1]
        # the cursor's own file is never its own context, and a visit is remembered too
        assert all(c[0] != "app.py" for c in chunks)
        assert [r for r in hook.recent.chunks() if "visited" in r.reason]
    finally:
        hook.close()
