"""WorkspaceIndex end to end on the fixture workspace: real tree-sitter, real LMDB, real files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fimble.errors import IndexLocked, IndexNotReady, IndexStoreError, InputError
from fimble.indexer import Definition, IndexConfig, WorkspaceIndex
from fimble.paths import index_root
from tests.indexer.conftest import GITIGNORED, SECRETS, SKIPPED_DIRS


def _indexed_paths(ix: WorkspaceIndex) -> set[str]:
    from fimble.indexer.build import known_files

    return set(known_files(ix._store))


def test_store_lives_under_fimble_home(index: WorkspaceIndex, fimble_home: Path) -> None:
    stats = index.stats()
    assert Path(stats.store_path).parent == index_root()
    assert str(fimble_home) in stats.store_path
    assert stats.ready and stats.files > 20 and stats.definitions > 50


def test_indexes_sources_and_text(index: WorkspaceIndex) -> None:
    paths = _indexed_paths(index)
    for rel in (
        "pyproj/pkg/models.py",
        "web/src/app.tsx",
        "goproj/store/store.go",
        "rustproj/src/shapes.rs",
        "javaproj/src/main/java/com/acme/App.java",
        "cproj/include/util.h",
        "cppproj/shapes.cpp",
        "docs/README.md",
        "pyproj/latin1.py",
        "sub/important.gen",
        "sub/keep.tmp",
        "sub/generated.txt",
    ):
        assert rel in paths, rel
    languages = dict(index.stats().languages)
    assert {"python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "text"} <= set(
        languages
    )


def test_skips_ignored_secret_binary_large_and_outside(index: WorkspaceIndex) -> None:
    paths = _indexed_paths(index)
    for rel in SECRETS:
        assert rel not in paths, rel
    for rel in {**SKIPPED_DIRS, **GITIGNORED}:
        assert rel not in paths, rel
    for text in GITIGNORED.values():
        assert index.search(text.split()[-1]) == ()
    for rel in (
        "debug.log",
        "generated.txt",
        "sub/skip.gen",
        "sub/scratch.tmp",
        "data/blob.txt",
        "big/huge.py",
        "stolen_link.py",
    ):
        assert rel not in paths, rel
    assert not any(p.startswith(("loop/", "outside_link/", "sub_alias/")) for p in paths)
    for word in SECRETS.values():
        assert index.search(word) == (), word
    assert index.definitions("outside_secret_function") == ()
    assert index.definitions("huge_only") == ()
    assert index.definitions("nodeModulesOnly") == () and index.definitions("venv_only_function") == ()


def test_invalid_utf8_file_still_parsed(index: WorkspaceIndex) -> None:
    (found,) = index.definitions("latin_function")
    assert found.path == "pyproj/latin1.py" and found.kind == "function"


def test_definitions_and_qualified_names(index: WorkspaceIndex) -> None:
    (user,) = index.definitions("User")
    assert (user.path, user.kind, user.language) == ("pyproj/pkg/models.py", "class", "python")
    assert user.signature == "@dataclasses.dataclass\nclass User:"
    assert user.doc == "A person who can log in."
    assert isinstance(user, Definition) and dataclasses.is_dataclass(user)
    with pytest.raises(dataclasses.FrozenInstanceError):
        user.name = "x"  # type: ignore[misc]
    (get,) = index.definitions("Store.Get")
    assert get.kind == "method" and get.path == "goproj/store/store.go"
    (area,) = index.definitions("geo::Shape::area")
    assert area.path == "cppproj/shapes.hpp"
    areas = {d.qualname for d in index.definitions("area")}
    assert {"geo::Shape::area", "geo::Circle::area", "Shape::area", "Circle::area", "Shape.area"} <= areas
    prefixed = {d.name for d in index.definitions("make", prefix=True)}
    assert "make_user" in prefixed


def test_file_outline_is_signatures_only(index: WorkspaceIndex, workspace: Path) -> None:
    outline = index.file_outline("pyproj/pkg/service.py")
    assert [d.qualname for d in outline] == [
        "UserService",
        "UserService.__init__",
        "UserService.add",
        "lookup",
    ]
    assert all("return" not in d.signature for d in outline)
    assert outline == index.file_outline(workspace / "pyproj/pkg/service.py")  # absolute path works too
    assert index.file_outline("no/such/file.py") == ()
    assert index.file_outline("/elsewhere/file.py") == ()


def test_imports_resolve_across_files(index: WorkspaceIndex) -> None:
    by_spec = {i.spec: i for i in index.imports_of("pyproj/pkg/service.py")}
    assert by_spec[".models"].targets == ("pyproj/pkg/models.py",)
    assert by_spec["."].targets == ("pyproj/pkg/models.py",)
    assert by_spec["pkg"].targets == ("pyproj/pkg/models.py",)
    assert by_spec["os"].targets == () and by_spec["os"].target is None
    assert by_spec["..outside"].targets == ()
    tsx = {i.spec: i.target for i in index.imports_of("web/src/app.tsx")}
    assert tsx == {
        "./util": "web/src/util.ts",
        "./components": "web/src/components/index.ts",
        "../lib/helpers.js": "web/lib/helpers.js",
    }
    go = {i.spec: i.targets for i in index.imports_of("goproj/main.go")}
    assert go == {"fmt": (), "example.com/goproj/store": ("goproj/store/store.go",)}
    assert index.imports_of("cproj/src/main.c")[1].target == "cproj/include/util.h"


def test_a_module_being_typed_resolves_by_the_same_rules(index: WorkspaceIndex) -> None:
    """``resolve_spec``: what an import not in the file yet would point at (a module path the user
    is typing), as ``imports_of`` resolves the file's own."""
    assert index.resolve_spec("web/src/app.tsx", "./util") == ("web/src/util.ts",)
    assert index.resolve_spec("web/src/app.tsx", "./components") == ("web/src/components/index.ts",)
    assert index.resolve_spec("web/src/app.tsx", "./ut") == ()  # half typed: no module yet
    assert index.resolve_spec("web/src/app.tsx", "..") == ()
    assert index.resolve_spec("not/indexed.ts", "./util") == ()


def test_symbols_near(index: WorkspaceIndex) -> None:
    near = index.symbols_near("pyproj/pkg/service.py", 14)  # inside UserService.add
    assert [d.qualname for d in near.enclosing] == ["UserService", "UserService.add"]
    referenced = [d.qualname for d in near.referenced]
    assert referenced[0] in ("make_user", "User", "MAX_USERS")
    assert {"make_user", "User"} <= set(referenced)
    assert all(d.path in ("pyproj/pkg/models.py", "pyproj/pkg/service.py") for d in near.referenced)


def test_search_bm25_with_exclude(index: WorkspaceIndex) -> None:
    hits = index.search("make_user name age MAX_USERS", k=3)
    assert hits and hits[0].path in ("pyproj/pkg/models.py", "pyproj/pkg/service.py")
    assert all(h.score > 0 for h in hits)
    assert "make_user" in hits[0].text
    (readme,) = index.search("zanzibarquux")
    assert readme.path == "docs/README.md" and "zanzibarquux" in readme.text
    excluded = index.search("zanzibarquux", exclude=("docs/README.md", (0, 10)))
    assert excluded == ()
    assert index.search("") == () and index.search("the and of") == ()


def test_update_buffer_and_remove(index: WorkspaceIndex, workspace: Path) -> None:
    assert index.update_buffer(workspace / "pyproj/pkg/extra.py", "def buffered_only(x):\n    return x\n")
    assert index.flush(10)
    (found,) = index.definitions("buffered_only")
    assert found.path == "pyproj/pkg/extra.py"
    index.remove_file("pyproj/pkg/extra.py")
    assert index.flush(10)
    assert index.definitions("buffered_only") == ()


def test_update_buffer_refuses_secrets_ignored_and_outside(index: WorkspaceIndex, tmp_path: Path) -> None:
    assert not index.update_buffer(".env", "LEAK = zqbufferleak\n")
    assert not index.update_buffer("certs/new.pem", "zqbufferleak")
    assert not index.update_buffer("debug.log", "zqbufferleak")
    assert not index.update_buffer("node_modules/x/index.js", "zqbufferleak")
    assert not index.update_buffer(tmp_path / "elsewhere.py", "zqbufferleak")
    assert index.flush(10)
    assert index.search("zqbufferleak") == ()


def test_not_ready_before_first_pass(workspace: Path, config: IndexConfig) -> None:
    with pytest.raises(IndexNotReady, match="no index yet"):
        WorkspaceIndex.open(workspace, config, writable=False)
    with WorkspaceIndex.open(workspace, config) as ix:
        assert not ix.stats().ready
        with pytest.raises(IndexNotReady):
            ix.definitions("User")
        ix.build()
        assert ix.definitions("User")


def test_read_only_alongside_writer(index: WorkspaceIndex, workspace: Path, config: IndexConfig) -> None:
    with WorkspaceIndex.open(workspace, config, writable=False) as reader:
        assert reader.definitions("User") == index.definitions("User")
        with pytest.raises(IndexStoreError, match="read-only"):
            reader.build()


def test_second_writer_in_process_is_refused(
    index: WorkspaceIndex, workspace: Path, config: IndexConfig
) -> None:
    with pytest.raises(IndexLocked):
        WorkspaceIndex.open(workspace, config)


def test_bad_roots(tmp_path: Path, config: IndexConfig) -> None:
    with pytest.raises(InputError, match="does not exist"):
        WorkspaceIndex.open(tmp_path / "missing", config)
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(InputError, match="not a folder"):
        WorkspaceIndex.open(tmp_path / "file.txt", config)


def test_closed_index_raises(workspace: Path, config: IndexConfig) -> None:
    ix = WorkspaceIndex.open(workspace, config)
    ix.build()
    ix.close()
    ix.close()  # idempotent
    with pytest.raises(IndexStoreError, match="closed"):
        ix.definitions("User")


def test_rebuild_gives_same_answers(index: WorkspaceIndex) -> None:
    before = (index.definitions("User"), index.file_outline("goproj/store/store.go"), index.stats().files)
    report = index.build(rebuild=True)
    assert report.parsed == report.scanned - report.skipped
    after = (index.definitions("User"), index.file_outline("goproj/store/store.go"), index.stats().files)
    assert before == after


def test_identifiers(index: WorkspaceIndex) -> None:
    idents = index.identifiers("pyproj/pkg/service.py")
    assert {"UserService", "make_user", "models", "RuntimeError"} <= set(idents)
    assert "def" not in idents and "return" not in idents
