"""The import statements a file lacks, in the forms it could write them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from fimble.completion.imports import IMPORT_CHOICES, ImportChoices, import_choices, split_choices
from fimble.indexer.types import Definition, Span


def _def(path: str, name: str, scope: str = "") -> Definition:
    qualname = f"{scope}.{name}" if scope else name
    return Definition(path, "python", "class", name, qualname, scope, Span(0, 0, 0, 0), f"class {name}:", "")


@dataclass(frozen=True)
class _Imp:
    names: tuple[str, ...]
    targets: tuple[str, ...] = ()


class _Index:
    """A src-layout package ``pkg`` with a namespace subpackage ``pkg/sansio`` and tests beside it."""

    files = frozenset({
        "src/pkg/__init__.py",
        "src/pkg/cache.py",
        "src/pkg/env.py",
        "src/pkg/nodes.py",
        "src/pkg/sansio/app.py",
        "tests/test_env.py",
        "tests/conftest.py",
    })
    defs = (
        _def("src/pkg/cache.py", "Bucket"),
        _def("src/pkg/env.py", "Environment"),
        _def("src/pkg/env.py", "method", scope="Environment"),
        _def("src/pkg/sansio/app.py", "App"),
    )
    reexports: ClassVar = {"src/pkg/__init__.py": [_Imp(("Environment",), ("src/pkg/env.py",))]}

    def has_file(self, rel: str) -> bool:
        return rel in self.files

    def definitions(self, name: str, limit: int = 50) -> list[Definition]:
        return [d for d in self.defs if d.name == name][:limit]

    def imports_of(self, rel: str) -> list[_Imp]:
        return self.reexports.get(rel, [])


def test_inside_the_package_both_relative_and_absolute_forms_are_choices() -> None:
    choices = import_choices(_Index(), "src/pkg/env.py", ["Bucket"], [])
    assert choices.modules == {".cache": ("Bucket",), "pkg.cache": ("Bucket",)}


def test_a_test_file_imports_absolutely_and_from_the_package_that_re_exports() -> None:
    choices = import_choices(_Index(), "tests/test_env.py", ["Environment", "Bucket"], [])
    assert choices.modules == {"pkg.env": ("Environment",), "pkg": ("Environment",), "pkg.cache": ("Bucket",)}


def test_a_namespace_subpackage_is_still_part_of_its_package() -> None:
    assert import_choices(_Index(), "src/pkg/env.py", ["App"], []).modules == {
        ".sansio.app": ("App",),
        "pkg.sansio.app": ("App",),
    }
    assert ".app" in import_choices(_Index(), "src/pkg/sansio/other.py", ["App"], []).modules


def test_a_workspace_module_used_by_name_is_imported_from_its_package() -> None:
    imports = [_Imp(("Environment",), ("src/pkg/env.py",))]
    choices = import_choices(_Index(), "tests/test_env.py", ["nodes"], imports)
    assert choices.modules == {"pkg": ("nodes",)}


def test_standard_library_names_and_modules_are_choices_too() -> None:
    choices = import_choices(_Index(), "src/pkg/env.py", ["Any", "os", "method", "nowhere"], [])
    assert choices.modules["typing"] == ("Any",)
    assert choices.plain == ("os",)
    assert not any("method" in names or "nowhere" in names for names in choices.modules.values())


def test_only_python_files_get_choices() -> None:
    assert not import_choices(_Index(), "src/app.ts", ["Bucket"], [])


def test_an_index_that_fails_means_no_choices_not_an_error() -> None:
    class Broken(_Index):
        def has_file(self, rel: str) -> bool:
            raise OSError("gone")

        def definitions(self, name: str, limit: int = 50) -> list[Definition]:
            raise OSError("gone")

    assert not import_choices(Broken(), "src/pkg/env.py", ["Bucket"], [])


def test_choices_travel_as_a_snippet_that_the_prompt_never_shows() -> None:
    choices = ImportChoices({".cache": ("Bucket", "Store")}, ("os",))
    snippet = choices.as_snippet("src/pkg/env.py")
    assert snippet[2] == IMPORT_CHOICES
    other = ("src/pkg/cache.py", "class Bucket:", "imported: Bucket")
    found, rest = split_choices([other, snippet])
    assert found == choices and rest == (other,)
    assert split_choices([other]) == (None, (other,))


def test_on_a_real_index_the_gatherer_hands_on_the_choices_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real tree-sitter and LMDB: a src-layout package whose module uses a class from a sibling."""
    from fimble.completion.context import gather_context
    from fimble.indexer import IndexConfig, WorkspaceIndex

    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text("from .cache import Bucket\n")
    (root / "src" / "pkg" / "cache.py").write_text("class Bucket:\n    def fill(self) -> None: ...\n")
    text = "import os\n\n\ndef new() -> Bucket:\n    return Bucket()\n"
    (root / "src" / "pkg" / "env.py").write_text(text)
    with WorkspaceIndex.open(root, IndexConfig(workers=0)) as index:
        index.build()
        chunks = gather_context(index, "src/pkg/env.py", text, 1)
    assert chunks[-1].reason == IMPORT_CHOICES and chunks[-1].path == "src/pkg/env.py"
    assert ImportChoices.from_text(chunks[-1].text).modules == {
        ".cache": ("Bucket",),
        "pkg.cache": ("Bucket",),
        ".": ("Bucket",),
        "pkg": ("Bucket",),
    }
