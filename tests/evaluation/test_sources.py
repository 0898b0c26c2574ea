"""Sources: sdist specs, unpacking a cached archive without pip, listing code files."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from fimble.errors import InputError
from fimble.evaluation.sources import fetch_sdist, source_files


def _sdist(folder: Path, name: str, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / f"{name}.tar.gz", "w:gz") as tf:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{path}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_spec_needs_an_exact_version(tmp_path: Path) -> None:
    for bad in ("requests", "requests>=2", "requests==", "../x==1"):
        with pytest.raises(InputError, match="NAME==VERSION"):
            fetch_sdist(bad, tmp_path)


def test_a_downloaded_archive_is_unpacked_once_and_reused(tmp_path: Path) -> None:
    _sdist(tmp_path / "downloads", "tiny_pkg-1.0", {"tiny_pkg/a.py": "x = 1\n", "README": "hi\n"})
    root = fetch_sdist("tiny-pkg==1.0", tmp_path)
    assert root == tmp_path / "tiny-pkg-1.0" and (root / "tiny_pkg" / "a.py").read_text() == "x = 1\n"
    (root / "marker").write_text("kept")
    assert fetch_sdist("tiny-pkg==1.0", tmp_path) == root and (root / "marker").exists()


def test_source_files_lists_code_only(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("def f():\r\n    return 1\r\n")
    (tmp_path / "pkg" / "notes.txt").write_text("prose")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.py").write_text("x = 1")
    (tmp_path / "bad.py").write_bytes(b"caf\xe9 = 1\n")
    assert source_files(tmp_path) == [("pkg/m.py", "def f():\n    return 1\n")]
    with pytest.raises(InputError):
        source_files(tmp_path / "missing")


def test_the_language_is_the_one_with_the_most_files(tmp_path: Path) -> None:
    from fimble.evaluation.sources import LANGUAGES, pick_language

    (tmp_path / "src").mkdir()
    for name in ("a.ts", "b.tsx", "c.ts"):
        (tmp_path / "src" / name).write_text("export const x = 1;\n")
    (tmp_path / "setup.py").write_text("x = 1\n")
    (tmp_path / "node_modules").mkdir()
    for i in range(5):
        (tmp_path / "node_modules" / f"m{i}.py").write_text("x = 1\n")  # (skipped, as the index does)
    assert pick_language(tmp_path) == "typescript"
    assert pick_language(tmp_path, "python") == "python"
    listed = [p for p, _ in source_files(tmp_path, LANGUAGES["typescript"])]
    assert listed == ["src/a.ts", "src/b.tsx", "src/c.ts"]
    assert pick_language(tmp_path / "src" / "..", "auto") == "typescript"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert pick_language(empty) == "python"
    with pytest.raises(InputError, match="--language"):
        pick_language(tmp_path, "cobol")
