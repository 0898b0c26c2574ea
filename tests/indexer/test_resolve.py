"""Import resolution rules, on a fake file set (the real path is covered by test_index.py)."""

from __future__ import annotations

import posixpath

import pytest

from fimble.indexer.resolve import resolve


class Files:
    def __init__(self, paths: list[str], modules: list[tuple[str, str]] = ()) -> None:
        self.paths = set(paths)
        self.modules = list(modules)

    def exists(self, rel: str) -> bool:
        return rel in self.paths

    def in_dir(self, rel_dir: str) -> list[str]:
        return [p for p in self.paths if posixpath.dirname(p) == rel_dir]

    def by_basename(self, name: str) -> list[str]:
        return [p for p in self.paths if posixpath.basename(p) == name]

    def go_modules(self) -> list[tuple[str, str]]:
        return self.modules


PY = Files(
    [
        "app/pkg/__init__.py",
        "app/pkg/models.py",
        "app/pkg/sub/__init__.py",
        "app/pkg/sub/deep.py",
        "app/main.py",
        "src/lib/__init__.py",
        "src/lib/util.py",
        "src/lib/typing.py",
        "tools/script.py",
        "tools/helper.py",
        "stubs/only.pyi",
    ]
)


@pytest.mark.parametrize(
    ("importer", "flavor", "spec", "names", "expected"),
    [
        ("app/pkg/sub/deep.py", "from", "..", ("models",), ("app/pkg/models.py",)),
        ("app/pkg/sub/deep.py", "from", "..models", ("User",), ("app/pkg/models.py",)),
        ("app/pkg/sub/deep.py", "from", ".", ("x",), ("app/pkg/sub/__init__.py",)),
        ("app/pkg/models.py", "from", "...", ("x",), ()),  # above the workspace root
        ("app/main.py", "module", "pkg.sub.deep", (), ("app/pkg/sub/deep.py",)),
        ("app/pkg/models.py", "module", "pkg.sub", (), ("app/pkg/sub/__init__.py",)),  # from the package root
        ("app/main.py", "from", "pkg", ("models", "VERSION"), ("app/pkg/models.py", "app/pkg/__init__.py")),
        ("app/main.py", "module", "lib.util", (), ("src/lib/util.py",)),  # src/ layout
        ("tools/script.py", "module", "helper", (), ("tools/helper.py",)),  # script next to a helper
        ("app/main.py", "module", "os.path", (), ()),
        ("src/lib/util.py", "module", "typing", (), ()),  # the standard library, not a package's typing.py
    ],
)
def test_python(
    importer: str, flavor: str, spec: str, names: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert resolve("python", importer, flavor, spec, names, False, PY) == expected


JS = Files(
    [
        "web/a.ts",
        "web/b.tsx",
        "web/c.js",
        "web/comp/index.tsx",
        "web/esm.ts",
        "web/data.json",
        "src/alias/x.ts",
        "web/types.d.ts",
    ]
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("./a", "web/a.ts"),
        ("./b", "web/b.tsx"),
        ("./c.js", "web/c.js"),
        ("./comp", "web/comp/index.tsx"),
        ("./esm.js", "web/esm.ts"),  # ESM TypeScript imports the emitted name
        ("./data.json", "web/data.json"),
        ("./types", "web/types.d.ts"),
        ("@/alias/x", "src/alias/x.ts"),
        ("react", None),
        ("../../outside", None),
    ],
)
def test_javascript(spec: str, expected: str | None) -> None:
    got = resolve("typescript", "web/main.ts", "module", spec, (), False, JS)
    assert got == ((expected,) if expected else ())


def test_go_packages_in_the_module() -> None:
    files = Files(
        [
            "svc/go.mod",
            "svc/main.go",
            "svc/store/store.go",
            "svc/store/db.go",
            "svc/store/store_test.go",
            "svc/store/inner/x.go",
        ],
        modules=[("svc", "example.com/svc")],
    )
    assert resolve("go", "svc/main.go", "module", "example.com/svc/store", (), False, files) == (
        "svc/store/db.go",
        "svc/store/store.go",
    )
    assert resolve("go", "svc/main.go", "module", "example.com/svc", (), False, files) == ("svc/main.go",)
    assert resolve("go", "svc/main.go", "module", "fmt", (), False, files) == ()


def test_rust_modules() -> None:
    files = Files(
        ["r/src/lib.rs", "r/src/shapes.rs", "r/src/geo/mod.rs", "r/src/geo/point.rs", "r/src/util.rs"]
    )
    assert resolve("rust", "r/src/lib.rs", "mod", "shapes", (), False, files) == ("r/src/shapes.rs",)
    assert resolve("rust", "r/src/lib.rs", "mod", "geo", (), False, files) == ("r/src/geo/mod.rs",)
    assert resolve("rust", "r/src/geo/mod.rs", "mod", "point", (), False, files) == ("r/src/geo/point.rs",)
    assert resolve("rust", "r/src/geo/point.rs", "module", "crate::shapes", (), False, files) == (
        "r/src/shapes.rs",
    )
    assert resolve("rust", "r/src/geo/point.rs", "module", "crate::geo::point::Point", (), False, files) == (
        "r/src/geo/point.rs",
    )
    assert resolve("rust", "r/src/geo/point.rs", "module", "super::super::util", (), False, files) == (
        "r/src/util.rs",
    )
    assert resolve("rust", "r/src/lib.rs", "module", "std::fmt", (), False, files) == ()


def test_java_by_path_suffix() -> None:
    files = Files(["p/src/main/java/com/acme/App.java", "p/src/main/java/com/acme/util/Strings.java"])
    assert resolve(
        "java", "p/src/main/java/com/acme/App.java", "module", "com.acme.util.Strings", (), False, files
    ) == ("p/src/main/java/com/acme/util/Strings.java",)
    assert resolve("java", "x.java", "module", "com.acme.util.Strings.join", (), False, files) == (
        "p/src/main/java/com/acme/util/Strings.java",
    )  # static import of a member
    assert resolve("java", "x.java", "module", "com.acme.util", (), True, files) == ()  # wildcard
    assert resolve("java", "x.java", "module", "java.util.List", (), False, files) == ()


def test_c_includes() -> None:
    files = Files(
        [
            "c/src/main.c",
            "c/src/local.h",
            "c/include/util.h",
            "include/top.h",
            "lib/a/config.h",
            "other/a/config.h",
        ]
    )
    assert resolve("c", "c/src/main.c", "module", "local.h", (), False, files) == ("c/src/local.h",)
    assert resolve("c", "c/src/main.c", "module", "top.h", (), False, files) == ("include/top.h",)
    assert resolve("c", "c/src/main.c", "module", "util.h", (), False, files) == ("c/include/util.h",)
    assert resolve("cpp", "lib/x.cpp", "module", "a/config.h", (), False, files) == ("lib/a/config.h",)
    assert resolve("c", "c/src/main.c", "module", "stdio.h", (), False, files) == ()


def test_text_has_no_imports() -> None:
    assert resolve("text", "README.md", "module", "x", (), False, PY) == ()
