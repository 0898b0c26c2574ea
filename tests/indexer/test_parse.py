"""Per-language tree-sitter queries (queries/*.scm) through parse.extract, on the fixture sources."""

from __future__ import annotations

import pytest

from fimble.indexer.languages import detect_language, parsed_languages
from fimble.indexer.parse import ParsedDef, extract
from tests.indexer.conftest import WORKSPACE


def _extract(rel: str):
    data = (WORKSPACE / rel).read_bytes()
    found = extract(detect_language(rel, data[:4096]), data)
    assert not found.has_errors, rel
    return found


def _defs(rel: str) -> dict[str, ParsedDef]:
    return {d.qualname: d for d in _extract(rel).definitions}


def _kinds(rel: str) -> dict[str, str]:
    return {q: d.kind for q, d in _defs(rel).items()}


def _imports(rel: str) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(i.flavor, i.spec, i.names) for i in _extract(rel).imports]


def test_every_language_has_a_compiling_query() -> None:
    assert set(parsed_languages()) == {
        "python",
        "javascript",
        "typescript",
        "tsx",
        "go",
        "rust",
        "java",
        "c",
        "cpp",
    }
    for language in parsed_languages():
        assert extract(language, b"").definitions == ()


def test_python() -> None:
    assert _kinds("pyproj/pkg/models.py") == {
        "MAX_USERS": "constant",
        "default_name": "variable",
        "User": "class",
        "User.greeting": "method",
        "User.is_adult": "method",
        "make_user": "function",
    }
    defs = _defs("pyproj/pkg/models.py")
    assert defs["User.greeting"].signature == "def greeting(self, polite: bool = True) -> str:"
    assert defs["User.greeting"].doc == "Return a greeting for this user."
    assert defs["User.greeting"].scope == "User"
    assert defs["User.is_adult"].signature == "@property\ndef is_adult(self) -> bool:"
    assert defs["make_user"].signature == "def make_user(\n    name: str,\n    age: int,\n) -> User:"
    assert defs["make_user"].doc == ""  # a comment inside the body is not a docstring
    assert (defs["User"].start_line, defs["User"].end_line) == (11, 27)
    assert _imports("pyproj/pkg/service.py") == [
        ("module", "os", ()),
        ("from", ".", ("models",)),
        ("from", ".models", ("User", "make_user")),
        ("from", "pkg", ("models",)),
        ("from", "..outside", ("nothing",)),
    ]


def test_javascript() -> None:
    defs = _defs("web/lib/helpers.js")
    assert {q: d.kind for q, d in defs.items()} == {
        "other": "constant",
        "double": "function",
        "triple": "function",
        "Greeter": "class",
        "Greeter.constructor": "method",
        "Greeter.greet": "method",
        "LIMIT": "constant",
    }
    assert defs["double"].doc == "Double a number."
    assert defs["Greeter.greet"].doc == "Say hello."
    assert defs["triple"].signature == "const triple = function (n)"
    assert _imports("web/lib/helpers.js") == [("module", "./other", ())]


def test_typescript() -> None:
    defs = _defs("web/src/util.ts")
    assert {q: d.kind for q, d in defs.items()} == {
        "API_URL": "constant",
        "Point": "interface",
        "Pair": "type",
        "Color": "enum",
        "add": "function",
        "scale": "function",
        "Counter": "class",
        "Counter.increment": "method",
        "Shape": "class",
        "Shape.area": "method",
        "stamp": "function",
    }
    assert defs["add"].signature == "export function add(a: number, b: number): number"
    assert defs["add"].doc == "Adds two numbers."
    assert defs["Point"].doc == "A point on the screen."
    assert defs["scale"].signature == "export const scale = (p: Point, k: number): Point =>"
    assert defs["Counter.increment"].doc == "Increment and return the new value."
    assert _imports("web/src/util.ts") == [("module", "date-fns", ("format",))]


def test_tsx() -> None:
    assert _kinds("web/src/components/button.tsx") == {"ButtonProps": "interface", "Button": "function"}
    assert _imports("web/src/app.tsx") == [
        ("module", "./util", ("add", "Counter", "Point")),
        ("module", "./components", ("Button",)),
        ("module", "../lib/helpers.js", ()),
    ]


def test_go() -> None:
    defs = _defs("goproj/store/store.go")
    assert {q: d.kind for q, d in defs.items()} == {
        "MaxItems": "constant",
        "defaultStore": "variable",
        "Store": "struct",
        "Getter": "interface",
        "New": "function",
        "Store.Get": "method",
        "Store.Put": "method",
    }
    assert defs["Store.Get"].signature == "func (s *Store) Get(key string) string"
    assert defs["Store.Get"].doc == "Get returns the value for key."
    assert defs["Store"].signature == "type Store struct"
    assert _imports("goproj/main.go") == [("module", "fmt", ()), ("module", "example.com/goproj/store", ())]


def test_rust() -> None:
    defs = _defs("rustproj/src/shapes.rs")
    assert {q: d.kind for q, d in defs.items()} == {
        "PI": "constant",
        "GREETING": "constant",
        "Shape": "trait",
        "Shape::area": "method",
        "Circle": "struct",
        "Kind": "enum",
        "Meters": "type",
        "Circle::new": "method",
        "Circle::area": "method",
        "square": "macro",
    }
    assert defs["Circle"].doc == "A round shape."  # through the #[derive] attribute
    assert defs["Circle::new"].signature == "pub fn new(radius: f64) -> Self"
    assert _imports("rustproj/src/lib.rs") == [
        ("mod", "shapes", ()),
        ("module", "crate::shapes", ("Circle", "Shape")),
        ("module", "std::fmt", ()),
    ]


def test_java() -> None:
    defs = _defs("javaproj/src/main/java/com/acme/util/Strings.java")
    assert {q: d.kind for q, d in defs.items()} == {
        "Strings": "class",
        "Strings.Strings": "method",
        "Strings.join": "method",
        "Formatter": "interface",
        "Formatter.format": "method",
        "Mode": "enum",
        "Pair": "class",
    }
    assert defs["Strings"].doc == "String helpers."
    assert defs["Strings.join"].signature == "public static String join(List<String> parts, String sep)"
    app = _defs("javaproj/src/main/java/com/acme/App.java")
    assert app["App.VERSION"].kind == "constant" and "names" not in {d.name for d in app.values()}
    assert _imports("javaproj/src/main/java/com/acme/App.java") == [
        ("module", "com.acme.util.Strings", ()),
        ("module", "java.util.List", ()),
    ]


def test_c() -> None:
    defs = _defs("cproj/include/util.h")
    assert {q: d.kind for q, d in defs.items()} == {
        "BUF_MAX": "constant",
        "MIN": "macro",
        "buffer": "struct",
        "buffer_t": "type",
        "level": "enum",
        "buffer_append": "prototype",
    }
    assert defs["buffer_append"].doc == "Append bytes to the buffer."
    impl = _defs("cproj/src/util.c")
    assert impl["buffer_append"].kind == "function"
    assert impl["last_byte"].signature == "static char *last_byte(struct buffer *b)"
    assert impl["kGrowth"].kind == "constant"
    assert _imports("cproj/src/main.c") == [("module", "stdio.h", ()), ("module", "util.h", ())]


def test_cpp() -> None:
    header = _defs("cppproj/shapes.hpp")
    assert {q: d.kind for q, d in header.items()} == {
        "geo": "module",
        "geo::kPi": "constant",
        "geo::Shape": "class",
        "geo::Shape::area": "method",
        "geo::Shape::name": "method",
        "geo::Point": "struct",
        "geo::twice": "function",
    }
    assert header["geo::twice"].signature == "template <typename T>\nT twice(T v)"
    assert header["geo::Shape"].doc == "Base class for shapes."
    source = _defs("cppproj/shapes.cpp")
    assert source["geo::Shape::name"].kind == "method"  # out-of-class definition, scoped by its receiver
    assert source["geo::Shape::name"].doc == "The shape's display name."
    assert source["geo::Circle::area"].kind == "method"
    assert _imports("cppproj/shapes.cpp") == [("module", "shapes.hpp", ())]


@pytest.mark.parametrize(
    ("language", "source"),
    [
        ("python", b"def broken(:\n    pass\nclass Ok:\n    pass\n"),
        ("go", b"package x\nfunc Good() {}\nfunc bad( {\n"),
        ("javascript", b"function good() {}\nfunction (\n"),
    ],
)
def test_syntax_errors_are_tolerated(language: str, source: bytes) -> None:
    found = extract(language, source)
    assert found.has_errors
    assert {d.name for d in found.definitions} & {"Ok", "Good", "good"}


def test_grouped_go_types_keep_their_own_signatures() -> None:
    found = extract("go", b"package x\n\ntype (\n\t// A doc.\n\tA int\n\tB string\n)\n")
    assert [(d.name, d.signature, d.doc) for d in found.definitions] == [
        ("A", "A int", "A doc."),
        ("B", "B string", ""),
    ]


def test_trailing_comment_is_not_a_doc() -> None:
    found = extract("python", b"x = 1  # about x\ndef f():\n    pass\n")
    assert [(d.name, d.doc) for d in found.definitions if d.name == "f"] == [("f", "")]


def test_c_and_cpp_share_cfamily_patterns() -> None:
    # cfamily.scm serves both grammars: the same declarations give the same definitions
    source = b"#define LIMIT 8\ntypedef int count_t;\nchar *make_name(int n);\nstatic const int kZero = 0;\n"
    for language in ("c", "cpp"):
        kinds = {d.name: d.kind for d in extract(language, source).definitions}
        expected = {"LIMIT": "constant", "count_t": "type", "make_name": "prototype", "kZero": "constant"}
        assert kinds == expected
