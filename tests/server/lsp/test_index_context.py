"""Repository context end to end: the real server indexes its workspace folder (tree-sitter, LMDB)
and puts the imported module's signatures into the prompt of a completion in another file."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import pytest_asyncio

from tests.server.lsp.conftest import (
    inline_params,
    open_doc,
    start_neovim_session,
    status,
    stop,
)

pytestmark = [pytest.mark.model, pytest.mark.asyncio(loop_scope="module")]

GEOMETRY = '''"""Shapes."""


def rectangle_area(width: float, height: float) -> float:
    """Area of a width x height rectangle."""
    return width * height


def circle_area(radius: float) -> float:
    return 3.14159 * radius * radius
'''

GEOMETRY_TS = "export function circleArea(radius: number): number {\n  return Math.PI * radius * radius;\n}\n"

APP = "from shapes.geometry import rectangle_area\n\n\ndef total(rooms):\n    return sum(\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("workspace")
    (root / "shapes").mkdir()
    (root / "shapes" / "__init__.py").write_text("")
    (root / "shapes" / "geometry.py").write_text(GEOMETRY)
    (root / "app.py").write_text(APP)
    (root / "web" / "lib").mkdir(parents=True)
    (root / "web" / "lib" / "geometry.ts").write_text(GEOMETRY_TS)
    c = await start_neovim_session(root, tmp_path_factory.mktemp("home"))
    yield c
    await stop(c)


async def _index_ready(client: Any, timeout: float = 120.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        st = await status(client)
        indexes = st["index"].get("indexes", [])
        if (indexes and all(i.get("ready") for i in indexes)) or loop.time() > end:
            return st
        await asyncio.sleep(0.2)


async def test_workspace_is_indexed_and_feeds_the_prompt(client: Any) -> None:
    st = await _index_ready(client)
    [index] = st["index"]["indexes"]
    assert index["ready"] and index["files"] >= 2 and index["definitions"] >= 2
    uri = (client.root / "app.py").as_uri()
    open_doc(client, uri, APP)
    await client.text_document_inline_completion_async(inline_params(uri, 4, len("    return sum(")))
    last = (await status(client))["last"]
    assert last["context_files"] >= 1, last


async def test_first_indexing_pass_is_reported_as_progress(client: Any) -> None:
    await _index_ready(client)
    loop = asyncio.get_running_loop()
    end = loop.time() + 30
    while loop.time() < end:
        reports = [r for values in client.progress_reports.values() for r in values]
        titles = [getattr(r, "title", None) for r in reports if r.kind == "begin"]
        ends = [getattr(r, "message", "") for r in reports if r.kind == "end"]
        if "fimble: indexing" in titles and any("files indexed" in (m or "") for m in ends):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no indexing progress: {reports}")


async def test_an_unsaved_edit_in_another_file_is_context_with_its_reason(client: Any) -> None:
    from lsprotocol import types

    await _index_ready(client)
    geometry = (client.root / "shapes" / "geometry.py").as_uri()
    open_doc(client, geometry, GEOMETRY)
    added = "\n\ndef triangle_area(base: float, height: float) -> float:\n    return base * height / 2\n"
    end = GEOMETRY.count("\n")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=geometry, version=2),
            [
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(end, 0), types.Position(end, 0)), text=added
                )
            ],
        )
    )
    text = "from shapes.geometry import circle_area\n\n\ndef roof(base, height):\n    return "
    (client.root / "roof.py").write_text(text)
    uri = (client.root / "roof.py").as_uri()
    open_doc(client, uri, text)
    await client.text_document_inline_completion_async(inline_params(uri, 4, len("    return ")))
    parts = (await status(client))["last"]["explain"]["parts"]
    recent = [p for p in parts if p["reason"].startswith("recently edited")]
    assert recent and recent[0]["path"] == "shapes/geometry.py", parts


async def test_an_import_line_is_kept_to_a_statement_that_works(client: Any) -> None:
    """Among the imports, the line names a module and a name the workspace really has: the one the
    code below calls and nothing imports yet."""
    await _index_ready(client)
    text = "import math\nfrom \n\nprint(rectangle_area(2.0, math.pi))\n"
    (client.root / "report.py").write_text(text)
    uri = (client.root / "report.py").as_uri()
    open_doc(client, uri, text)
    result = await client.text_document_inline_completion_async(inline_params(uri, 1, len("from ")))
    items = result.items if hasattr(result, "items") else result
    assert items and items[0].insert_text == "shapes.geometry import rectangle_area", items
    last = (await status(client))["last"]
    assert last["explain"]["guide"] == "kept", last


async def test_a_typescript_import_with_its_names_typed_is_kept_to_their_module(client: Any) -> None:
    """``import { circleArea } from '..|'``, the quote closed as an editor closes it: the names are
    typed, the module is not, and the index knows which module defines them."""
    await _index_ready(client)
    text = "import { circleArea } from '..';\n\nexport const dome = circleArea(2) / 2;\n"
    path = client.root / "web" / "app" / "dome.ts"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    uri = path.as_uri()
    open_doc(client, uri, text, "typescript")
    cursor = len("import { circleArea } from '..")
    result = await client.text_document_inline_completion_async(inline_params(uri, 0, cursor))
    items = result.items if hasattr(result, "items") else result
    assert items and items[0].insert_text == "/lib/geometry", items
    last = (await status(client))["last"]
    assert last["explain"]["guide"] == "kept", last
