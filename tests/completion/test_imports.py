"""The import statements a file lacks, in the forms it could write them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from fimble.completion.context.imports import IMPORT_CHOICES, ImportChoices, import_choices, split_choices
from fimble.indexer.types import Definition, Span
from tests.real_index import gather_on_disk


def _def(path: str, name: str, scope: str = "") -> Definition:
    qualname = f"{scope}.{name}" if scope else name
    return Definition(path, "python", "class", name, qualname, scope, Span(0, 0, 0, 0), f"class {name}:", "")


@dataclass(frozen=True)
class _Imp:
    names: tuple[str, ...]
    targets: tuple[str, ...] = ()
    spec: str = ""


class _Index:
    """A src-layout package ``pkg`` with a namespace subpackage ``pkg/sansio`` and tests beside it."""

    files = frozenset(
        {
            "src/pkg/__init__.py",
            "src/pkg/cache.py",
            "src/pkg/env.py",
            "src/pkg/nodes.py",
            "src/pkg/sansio/app.py",
            "tests/test_env.py",
            "tests/conftest.py",
        }
    )
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


def test_in_an_open_list_the_listed_module_gives_every_missing_name_it_binds() -> None:
    """``from pkg.env import (``: Environment is defined there, Bucket only imported there (so
    ``from pkg.env import Bucket`` works); Nowhere is not bound by it at all."""

    class Index(_Index):
        reexports: ClassVar = {
            **_Index.reexports,
            "src/pkg/env.py": [_Imp(("Bucket",), ("src/pkg/cache.py",))],
        }

        def file_outline(self, rel: str) -> list[Definition]:
            return [d for d in self.defs if d.path == rel]

    imports = [_Imp(("method",), ("src/pkg/env.py",), spec="pkg.env")]
    unbound = ["Environment", "Bucket", "Nowhere"]
    choices = import_choices(Index(), "tests/test_env.py", unbound, imports, listing="pkg.env")
    assert choices.modules["pkg.env"] == ("Environment", "Bucket")
    assert "pkg.env" not in import_choices(Index(), "tests/test_env.py", ["Bucket"], imports).modules
    outside = import_choices(Index(), "tests/test_env.py", ["Bucket"], imports, listing="os")
    assert "os" not in outside.modules  # (not a workspace module: nothing is known of what it binds)


def test_standard_library_names_and_modules_are_choices_too() -> None:
    choices = import_choices(_Index(), "src/pkg/env.py", ["Any", "os", "method", "nowhere"], [])
    assert choices.modules["typing"] == ("Any",)
    assert choices.plain == ("os",)
    assert not any("method" in names or "nowhere" in names for names in choices.modules.values())


def test_a_name_defined_nowhere_is_offered_as_the_name_it_ends_with_under_an_alias() -> None:
    """requests' models.py: ``RequestsSSLError`` is ``from .exceptions import SSLError as
    RequestsSSLError``; the alias is part of the choice (the model cannot guess it)."""
    choices = import_choices(_Index(), "src/pkg/env.py", ["PkgBucket", "_Bucket", "Bucketless", "Xy"], [])
    assert choices.modules == {
        ".cache": ("Bucket as PkgBucket", "Bucket as _Bucket"),
        "pkg.cache": ("Bucket as PkgBucket", "Bucket as _Bucket"),
    }
    assert ImportChoices.from_text(choices.as_text()) == choices


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
    files = {
        "src/pkg/__init__.py": "from .cache import Bucket\n",
        "src/pkg/cache.py": "class Bucket:\n    def fill(self) -> None: ...\n",
        "src/pkg/env.py": "import os\n\n\ndef new() -> Bucket:\n    return Bucket()\n",
    }
    chunks = gather_on_disk(tmp_path, monkeypatch, files, "src/pkg/env.py", 1)
    assert chunks[-1].reason == IMPORT_CHOICES and chunks[-1].path == "src/pkg/env.py"
    assert ImportChoices.from_text(chunks[-1].text).modules == {
        ".cache": ("Bucket",),
        "pkg.cache": ("Bucket",),
        ".": ("Bucket",),
        "pkg": ("Bucket",),
    }


def test_on_a_real_index_an_open_list_of_a_re_importing_module_gets_its_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real tree-sitter and LMDB, requests' layout: ``compat`` takes ``Morsel`` from the standard
    library, and a test lists it among ``from pkg.compat import (...)``."""
    from fimble.completion.engine.guide import import_guide

    head = "from pkg.compat import (\n    \n    basestring,\n)\n\n\n"
    text = head + "def test_m():\n    assert Morsel(basestring)\n"
    files = {
        "src/pkg/__init__.py": "",
        "src/pkg/compat.py": "from http.cookies import Morsel\nbasestring = (str, bytes)\n",
        "tests/test_compat.py": text,
    }
    chunks = gather_on_disk(tmp_path, monkeypatch, files, "tests/test_compat.py", 1)
    choices, _ = split_choices([c.as_tuple() for c in chunks])
    assert choices is not None and choices.modules["pkg.compat"] == ("Morsel",)
    guide = import_guide(choices, text[: text.index("\n    \n") + 5])
    assert guide is not None and guide.within == "pkg.compat" and guide.finished("Morsel,")
