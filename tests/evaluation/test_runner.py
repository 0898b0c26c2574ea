"""Preparing samples on a real index (tree-sitter, LMDB): the masked line is hidden from retrieval
while its context is gathered, cross-file lines are marked, and every file is restored afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from fimble.completion.context.gather import ContextGatherer
from fimble.evaluation.runner import EvalConfig, open_index, prepare
from fimble.evaluation.sources import source_files

SHAPES = """def rectangle_area(width, height):
    return width * height


def circle_area(radius):
    return 3.14159 * radius * radius
"""

APP = """from shapes import circle_area, rectangle_area


def house(width, height, radius):
    walls = rectangle_area(width, height)
    window = circle_area(radius)
    return walls - window
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    root = tmp_path / "repo"
    root.mkdir()
    (root / "shapes.py").write_text(SHAPES)
    (root / "app.py").write_text(APP)
    return root


def test_prepare_hides_the_line_marks_cross_file_and_restores(repo: Path) -> None:
    files = source_files(repo)
    index = open_index(repo)
    try:
        prepared = prepare(index, files, EvalConfig(samples=8, seed=0, cross_share=0.5))
        assert prepared
        cross = [p for p in prepared if p.sample.cross_file]
        assert cross and all(p.sample.path == "app.py" for p in cross)
        for p in prepared:
            s = p.sample
            assert s.truth not in p.text.split("\n")[s.line]
            assert p.text[: p.offset].endswith(dict(files)[s.path].split("\n")[s.line][: s.column])
            for path, _text, reason in p.chunks:
                assert reason and path != s.path
        # while the import line is masked, the index does not see that import
        masked_import = [p for p in prepared if p.sample.path == "app.py" and p.sample.line == 0]
        assert masked_import
        for p in masked_import:
            assert not any(reason.startswith("imported") for _, _, reason in p.chunks)
        others = [p for p in prepared if p.sample.path == "app.py" and p.sample.line > 1]
        assert any(reason.startswith("imported") for p in others for _, _, reason in p.chunks)
        # restored: the index sees the files as they are on disk again
        assert [d.name for d in index.file_outline("app.py")] == ["house"]
        assert [d.name for d in index.file_outline("shapes.py")] == ["rectangle_area", "circle_area"]
        assert {i.names for i in index.imports_of("app.py")} == {("circle_area", "rectangle_area")}
    finally:
        index.close()


def test_cross_unseen_keeps_only_names_the_file_has_not_shown_above(repo: Path) -> None:
    files = source_files(repo)
    index = open_index(repo)
    try:
        every = prepare(index, files, EvalConfig(samples=8, seed=0, cross_share=1.0))
        unseen = prepare(index, files, EvalConfig(samples=8, seed=0, cross_share=1.0, cross_unseen=True))
    finally:
        index.close()
    # ``house`` calls the two functions the import line above it names: cross-file, but not unseen
    assert any(p.sample.cross_file and p.sample.line > 1 for p in every)
    assert not any(p.sample.cross_file and p.sample.line > 1 for p in unseen)


def test_each_sample_hides_only_its_own_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other files are as on disk while a sample's context is gathered: an earlier sample's mask
    would hide a definition a later sample's context needs."""
    names = [f"unit_{i}" for i in range(12)]
    (repo / "units.py").write_text("".join(f"def {n}(): pass\n" for n in names))
    files = source_files(repo)
    index = open_index(repo)
    on_disk = {"app.py": ["house"], "shapes.py": ["rectangle_area", "circle_area"], "units.py": names}
    checked: list[str] = []
    gather = ContextGatherer.chunks

    def chunks(self, path, text, line, **kw):  # type: ignore[no-untyped-def]
        for other, names in on_disk.items():
            if other != path:
                assert [d.name for d in index.file_outline(other)] == names
        checked.append(path)
        return gather(self, path, text, line, **kw)

    monkeypatch.setattr(ContextGatherer, "chunks", chunks)
    try:
        prepare(index, files, EvalConfig(samples=16, seed=0, cross_share=0.5))
    finally:
        index.close()
    assert "units.py" in checked and len(set(checked)) > 1


SHAPES_TS = """export function area(w: number, h: number): number {
  return w * h;
}
export class Box {
  #count = 0;
  grow(): number { return this.#count++; }
}
"""

APP_TS = """import { area as surface } from './shapes';
import * as S from './shapes.js';
import * as fs from 'node:fs';

export function house(w: number): number {
  const b = new S.Box();
  fs.readFileSync('x');
  return surface(w, w) + S.area(1, 2) + b.grow();
}
"""


def test_typescript_lines_are_classified_through_their_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fimble.evaluation.runner import classifier
    from fimble.evaluation.sources import LANGUAGES

    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    root = tmp_path / "web"
    (root / "src").mkdir(parents=True)
    (root / "src" / "shapes.ts").write_text(SHAPES_TS)
    (root / "src" / "app.ts").write_text(APP_TS)
    files = source_files(root, LANGUAGES["typescript"])
    index = open_index(root)
    try:
        names = classifier(index, files, EvalConfig())
        lines = APP_TS.split("\n")

        def at(needle: str) -> list[str]:
            i = next(n for n, line in enumerate(lines) if needle in line)
            return names("src/app.ts", i, len(lines[i]) - len(lines[i].lstrip()))

        assert at("return surface") == ["surface", "area", "grow"]  # an alias, a namespace, a method
        assert at("new S.Box") == ["Box"]
        assert at("readFileSync") == []  # ``fs`` is a module from outside the workspace
    finally:
        index.close()
