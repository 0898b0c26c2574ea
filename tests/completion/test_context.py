"""Context selection over a fake index: order, reasons, dedup, stickiness, failures."""

from __future__ import annotations

from dataclasses import dataclass, field

from fimble.completion.context.gather import ContextChunk, ContextGatherer, gather_context


@dataclass(frozen=True)
class Span:
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Def:
    path: str
    name: str
    kind: str = "function"
    qualname: str = ""
    signature: str = ""
    doc: str = ""
    span: Span = Span(0, 0)
    scope: str = ""


@dataclass(frozen=True)
class Imp:
    targets: tuple[str, ...]
    names: tuple[str, ...] = ()
    line: int | None = None
    spec: str = ""


@dataclass(frozen=True)
class Near:
    referenced: tuple[Def, ...] = ()


@dataclass(frozen=True)
class Snip:
    path: str
    start_line: int
    end_line: int
    text: str
    score: float


@dataclass
class FakeIndex:
    outlines: dict[str, list[Def]] = field(default_factory=dict)
    imports: list[Imp] = field(default_factory=list)
    near: Near = Near()
    snippets: list[Snip] = field(default_factory=list)
    calls: int = 0
    broken: bool = False
    other_imports: dict[str, list[Imp]] = field(default_factory=dict)

    def file_outline(self, path: str) -> list[Def]:
        return self.outlines.get(path, [])

    def imports_of(self, path: str) -> list[Imp]:
        self.calls += 1
        if self.broken:
            raise OSError("store gone")
        return self.other_imports.get(path, self.imports)

    def symbols_near(self, path: str, line: int) -> Near:
        return self.near

    def search(self, text: str, k: int = 8, exclude: object = None) -> list[Snip]:
        return self.snippets[:k]


def index() -> FakeIndex:
    return FakeIndex(
        outlines={
            "util/dates.py": [
                Def(
                    "util/dates.py",
                    "parse",
                    qualname="parse",
                    signature="def parse(s: str) -> date:",
                    doc="Parse ISO.",
                ),
                Def("util/dates.py", "other", qualname="other", signature="def other():"),
            ]
        },
        imports=[Imp(("util/dates.py",), ("parse",)), Imp((), ("os",))],
        near=Near(
            (
                Def("util/dates.py", "parse", qualname="parse", signature="def parse(s: str) -> date:"),
                Def("models.py", "User", kind="class", qualname="User", signature="class User(Base):"),
            )
        ),
        snippets=[
            Snip("other.py", 0, 3, "for row in rows:\n    total += row.amount\n", 3.2),
            Snip("app.py", 0, 1, "x = parse(s)\n", 2.0),
        ],
    )


def test_order_and_reasons() -> None:
    """Similar code cut to the spot like the cursor's first (what the next line most often is,
    in ~100 tokens), then what the cursor's surroundings use: imports, definitions."""
    chunks = gather_context(index(), "app.py", "from util.dates import parse\n\n\nx = parse(s, User)\n", 3)
    assert [c.path for c in chunks] == ["other.py", "util/dates.py", "models.py"]
    assert chunks[0].reason.startswith("similar code")
    assert chunks[1].reason == "imported: parse"
    assert "def parse(s: str) -> date:" in chunks[1].text and "def other" not in chunks[1].text
    assert chunks[2].reason == "defines User, used near the cursor"


def test_similar_code_with_no_spot_like_the_cursors_is_shown_whole_and_last() -> None:
    idx = index()
    idx.snippets = [Snip("short.py", 0, 1, "def scale(xs, k):\n    return [x * k for x in xs]\n", 3.2)]
    text = "from util.dates import parse\n\n\ndef a():\n    b = 1\n    c = parse(b)\n    return c\n"
    chunks = gather_context(idx, "app.py", text, 6)
    assert chunks[-1].path == "short.py" and chunks[-1].text.startswith("def scale(xs, k):")


def test_similar_code_is_cut_to_the_spot_that_reads_like_the_cursors_lines() -> None:
    idx = index()
    rows = [f"step_{i}()" for i in range(30)]
    rows[20:23] = ["total = 0", "for row in rows:", "    total += row.amount"]
    idx.snippets = [Snip("other.py", 0, 29, "\n".join(rows) + "\n", 3.2)]
    text = "def f(rows):\n    total = 0\n    for row in rows:\n        \n"
    chunk = next(c for c in gather_context(idx, "app.py", text, 3) if c.path == "other.py")
    assert chunk.text.splitlines() == rows[17:26]  # five lines before the spot, three after


def test_chunks_repeating_the_cursor_region_are_dropped() -> None:
    idx = index()
    idx.snippets = [Snip("copy.py", 0, 1, "x = parse(s)\ny = 2\n", 5.0)]
    text = "from util.dates import parse\nx = parse(s)\ny = 2\n"
    assert all(c.path != "copy.py" for c in gather_context(idx, "app.py", text, 1))


def test_chunks_repeating_earlier_chunks_are_dropped() -> None:
    idx = index()
    idx.snippets = [Snip("util/dates.py", 0, 2, 'def parse(s: str) -> date:\n    """Parse ISO."""\n', 4.0)]
    chunks = gather_context(idx, "app.py", "x = 1\n", 0)
    assert [c.reason for c in chunks].count("imported: parse") == 1
    assert not any(c.reason.startswith("similar code") for c in chunks)


def test_recent_edits_are_included_after_definitions() -> None:
    recent = [ContextChunk("notes.py", "TODO = ['ship it']", "")]
    chunks = gather_context(index(), "app.py", "x = parse(s)\n", 0, recent=recent)
    assert ("notes.py", "recently edited") in [(c.path, c.reason) for c in chunks]


def test_index_failure_means_less_context_not_an_error() -> None:
    idx = index()
    idx.broken = True
    chunks = gather_context(idx, "app.py", "x = parse(s)\n", 0)
    assert chunks  # symbols_near and search still answered


def test_gatherer_is_sticky_within_a_region() -> None:
    idx = index()
    g = ContextGatherer(idx, region=10)
    first = g.chunks("app.py", "x = parse(s)\n", 5)
    once = idx.calls  # index reads of one gathering
    assert g.chunks("app.py", "x = parse(s)\n", 12) is first
    assert idx.calls == once
    g.chunks("app.py", "x = parse(s)\n", 40)
    assert idx.calls == 2 * once
    g.forget("app.py")
    g.chunks("app.py", "x = parse(s)\n", 40)
    assert idx.calls == 3 * once


def test_no_index_no_context() -> None:
    assert ContextGatherer(None).chunks("a.py", "x", 0) == []


def test_chunks_mentioning_names_near_the_cursor_come_first() -> None:
    idx = index()
    idx.near = Near((Def("models.py", "User", kind="class", qualname="User", signature="class User(Base):"),))
    text = "from util.dates import parse\n" + "pass\n" * 20 + "u = User()\nu."
    chunks = gather_context(idx, "app.py", text, 22)
    assert chunks[0].path == "models.py"  # `User` is written right above the cursor; `parse` is not


def test_among_the_imports_whole_module_outlines_are_shown() -> None:
    idx = index()
    idx.imports = [Imp(("util/dates.py",), ("parse",), line=0, spec="util.dates")]
    chunks = gather_context(idx, "app.py", "from util.dates import parse\n\n", 1)
    dates = next(c for c in chunks if c.path == "util/dates.py")
    assert "def other():" in dates.text and '"""' not in dates.text  # every name, compactly
    assert "among the imports" in dates.reason
    far = gather_context(idx, "app.py", "from util.dates import parse\n" + "x = 1\n" * 30, 30)
    assert "def other" not in next(c for c in far if c.path == "util/dates.py").text


def test_a_package_outline_lists_what_it_reexports() -> None:
    idx = index()
    idx.imports = [Imp(("pkg/__init__.py",), (), line=0, spec="pkg")]
    version = Def("pkg/__init__.py", "VERSION", kind="constant", signature="VERSION = 1")
    idx.outlines["pkg/__init__.py"] = [version]
    idx.other_imports["pkg/__init__.py"] = [Imp(("pkg/api.py",), ("get", "post"), line=0, spec=".api")]
    chunks = gather_context(idx, "app.py", "import pkg\n\nr = pkg.", 2)
    assert "from .api import get, post" in next(c for c in chunks if c.path == "pkg/__init__.py").text


def test_definitions_from_unrelated_test_files_are_left_out() -> None:
    idx = index()
    idx.near = Near((Def("tests/test_other.py", "foo", qualname="foo", signature="def foo(bar):"),))
    chunks = gather_context(idx, "app.py", "x = foo(1)\n", 0)
    assert all(c.path != "tests/test_other.py" for c in chunks)


def _similar(idx: FakeIndex, path: str) -> list[str]:
    chunks = gather_context(idx, path, "rows = load()\n", 0)
    return [c.path for c in chunks if c.reason.startswith("similar code")]


def test_variables_of_files_the_imports_do_not_reach_are_left_out() -> None:
    idx = index()
    script = "examples/hello.py"
    result = Def(script, "result", kind="variable", qualname="result", signature="result = run()")
    limit = Def(script, "LIMIT", kind="constant", qualname="LIMIT", signature="LIMIT = 3")
    helper = Def(script, "run", qualname="run", signature="def run() -> Result:")
    idx.near = Near((result, limit, helper))
    chunks = gather_context(idx, "app.py", "result = run()\nprint(result, LIMIT)\n", 1)
    reasons = [c.reason for c in chunks]
    assert "defines run, used near the cursor" in reasons  # a function is worth its signature
    assert not any("defines result" in r or "defines LIMIT" in r for r in reasons)


def test_variables_of_files_the_imports_reach_are_kept() -> None:
    idx = index()  # app.py imports util/dates.py, which imports cal.py
    idx.other_imports["util/dates.py"] = [Imp(("cal.py",), ("WEEK",))]
    week = Def("cal.py", "week", kind="variable", qualname="week", signature="week = Week(7)")
    idx.outlines["cal.py"] = [week]
    idx.near = Near((week,))
    chunks = gather_context(idx, "app.py", "x = 1\ny = week\n", 1)
    assert "defines week, used near the cursor" in [c.reason for c in chunks]


def test_names_only_in_docstrings_or_comments_near_the_cursor_define_nothing() -> None:
    idx = index()
    prop = Def("wrappers.py", "blueprints", kind="method", signature="def blueprints(self) -> list[str]:")
    short = Def("globals.py", "g", kind="variable", qualname="g", signature="g = LocalProxy()")
    idx.other_imports["util/dates.py"] = [Imp(("globals.py",), ("g",))]  # reachable, two hops
    idx.outlines["globals.py"] = [short]
    idx.near = Near((prop, short))
    text = 'def iter_blueprints(self):\n    """Iterates over all blueprints."""\n    g.x = 1  # blueprints\n'
    reasons = [c.reason for c in gather_context(idx, "app.py", text, 2)]
    assert "defines g, used near the cursor" in reasons  # code, however short the name
    assert not any("defines blueprints" in r for r in reasons)  # prose only
    # Not Python: every word near the cursor counts, as the index found them.
    reasons = [c.reason for c in gather_context(idx, "app.js", text, 2)]
    assert "defines blueprints, used near the cursor" in reasons


def test_a_builtin_called_by_its_bare_name_is_not_the_workspace_method_of_that_name() -> None:
    idx = index()
    method = Def("runtime.py", "super", kind="method", qualname="Context.super", signature="def super(self):")
    idx.near = Near((method,))
    text = "class Cache(Extension):\n    def __init__(self, env):\n        super().__init__(env)\n"
    reasons = [c.reason for c in gather_context(idx, "ext.py", text, 2)]
    assert not any("defines super" in r for r in reasons)
    # Called as an attribute, the name is the workspace's method.
    text = "def render(ctx):\n    return ctx.super()\n"
    reasons = [c.reason for c in gather_context(idx, "ext.py", text, 1)]
    assert "defines super, used near the cursor" in reasons


def test_similar_code_comes_from_files_of_the_cursor_language() -> None:
    idx = index()
    idx.snippets = [
        Snip("docs/cli.rst", 0, 3, "The --host option binds the server.\n", 9.0),
        Snip("requirements/dev.txt", 0, 3, "pytest==8.1.1\n    # via tests\n", 8.0),
        Snip("stubs/rows.pyi", 0, 3, "def total(rows: list[Row]) -> int: ...\n", 7.0),
        Snip("other.py", 0, 3, "for row in rows:\n    total += row.amount\n", 3.2),
    ]
    assert _similar(idx, "app.py") == ["stubs/rows.pyi", "other.py"]


def test_similar_code_in_a_language_family_and_for_text_files() -> None:
    idx = index()
    idx.snippets = [
        Snip("lib/rows.ts", 0, 3, "for (const row of rows) total += row.amount;\n", 5.0),
        Snip("lib/rows.py", 0, 3, "for row in rows:\n    total += row.amount\n", 4.0),
    ]
    assert _similar(idx, "web/app.js") == ["lib/rows.ts"]  # TypeScript reads like JavaScript
    assert sorted(_similar(idx, "NOTES.md")) == ["lib/rows.py", "lib/rows.ts"]  # a text file: any


def test_a_referenced_class_is_shown_as_a_skeleton_and_a_method_under_its_class() -> None:
    idx = index()  # app.py imports util/dates.py, which imports cal.py (two hops)
    idx.other_imports["util/dates.py"] = [Imp(("cal.py",), ("Calendar",))]
    cls = Def("cal.py", "Calendar", kind="class", qualname="Calendar", signature="class Calendar:")
    add = Def(
        "cal.py",
        "add",
        kind="method",
        qualname="Calendar.add",
        signature="def add(\n    self, day: date\n) -> None:",
        scope="Calendar",
    )
    idx.outlines["cal.py"] = [cls, add]
    idx.near = Near((cls,))
    chunks = gather_context(idx, "app.py", "c = Calendar()\n", 0)
    skeleton = next(c for c in chunks if c.reason.startswith("defines Calendar"))
    assert skeleton.text == "class Calendar:\n    def add(self, day: date) -> None: ..."
    idx.near = Near((add,))
    chunks = gather_context(idx, "app.py", "c.add(d)\n", 0)
    method = next(c for c in chunks if c.reason.startswith("defines add"))
    assert method.text == "class Calendar:\n    def add(self, day: date) -> None: ..."


def test_a_receiver_is_recognised_by_the_methods_called_on_it() -> None:
    idx = index()
    cls = Def("util/dates.py", "Calendar", kind="class", qualname="Calendar", signature="class Calendar:")
    methods = [
        Def(
            "util/dates.py",
            n,
            kind="method",
            qualname=f"Calendar.{n}",
            signature=f"def {n}(self):",
            scope="Calendar",
        )
        for n in ("add", "remove", "clear")
    ]
    idx.outlines["util/dates.py"].extend([cls, *methods])
    idx.near = Near(())
    text = "def test(cal):\n    cal.add(1)\n    cal.remove(1)\n    cal."
    chunks = gather_context(idx, "tests/test_cal.py", text, 3)
    assert chunks[0].reason == "cal looks like a Calendar (uses 2 of its methods)"
    assert "def clear(self): ..." in chunks[0].text


def test_an_import_far_down_does_not_make_the_whole_file_an_import_block() -> None:
    idx = index()
    idx.imports = [
        Imp(("util/dates.py",), ("parse",), line=0, spec="util.dates"),
        Imp(("util/dates.py",), ("other",), line=80, spec="util.dates"),
    ]
    rows = ["from util.dates import parse"] + ["x = 1"] * 100
    rows[80] = "    from util.dates import other"
    text = "\n".join(rows) + "\n"
    middle = gather_context(idx, "app.py", text, 40)
    assert not any("among the imports" in c.reason for c in middle)
    assert any("among the imports" in c.reason for c in gather_context(idx, "app.py", text, 81))


def test_an_import_written_inside_a_function_gets_the_choices_of_the_names_it_lacks() -> None:
    """flask's ``from .testing import EnvironBuilder`` in a method, no other import near: the line
    being written is an import, so the names the file uses unbound are its choices."""
    from fimble.completion.context.imports import IMPORT_CHOICES, ImportChoices

    parse = Def("util/dates.py", "parse", signature="def parse(s):")

    class WithDefinitions(FakeIndex):
        def definitions(self, name: str, limit: int = 50) -> list[Def]:
            return [parse] if name == "parse" else []

        def has_file(self, rel: str) -> bool:
            return rel == "util/__init__.py"

    idx = WithDefinitions(outlines=index().outlines, imports=[])
    rows = [
        "import os",
        "",
        *["x = 1"] * 40,
        "def f(s):",
        "    from util.dates import ",
        "    return parse(s)",
        "",
    ]
    text = "\n".join(rows)
    chunks = gather_context(idx, "app.py", text, 43)
    choices = next(ImportChoices.from_text(c.text) for c in chunks if c.reason == IMPORT_CHOICES)
    assert choices.modules["util.dates"] == ("parse",)
    # Away from it (more than the two lines an import block reaches), none.
    assert not any(c.reason == IMPORT_CHOICES for c in gather_context(idx, "app.py", text, 30))
    # The same region asked first at the blank line (a line start), then with the import typed:
    # the choices come, the prompt's chunks stay.
    blank = text.replace("    from util.dates import ", "    ")
    g = ContextGatherer(idx, region=10)
    before = g.chunks("app.py", blank, 43)
    after = g.chunks("app.py", text, 43)
    assert not any(c.reason == IMPORT_CHOICES for c in before)
    assert [c for c in after if c.reason != IMPORT_CHOICES] == before
    assert any(c.reason == IMPORT_CHOICES for c in after)


def test_an_import_the_buffer_no_longer_has_binds_nothing() -> None:
    """The index reads the file as saved; the buffer is newer. An import line being rewritten
    (deleted in the buffer) is neither shown as imported nor counted as binding its names."""
    idx = index()
    idx.imports = [
        Imp(("util/dates.py",), ("parse",), line=0, spec="util.dates"),
        Imp(("models.py",), ("User",), line=1, spec="models"),
    ]
    text = "from util.dates import parse\n\n\nx = parse(s, User)\n"
    reasons = [c.reason for c in gather_context(idx, "app.py", text, 1)]
    assert "imported: parse (whole module: cursor among the imports)" in reasons
    assert not any(r.startswith("imported: User") for r in reasons)


def test_a_package_reexport_used_in_the_file_shows_its_definition() -> None:
    idx = index()
    idx.imports = [Imp(("pkg/__init__.py",), (), line=0, spec="pkg")]
    idx.outlines["pkg/__init__.py"] = []
    idx.outlines["pkg/api.py"] = [
        Def("pkg/api.py", "post", qualname="post", signature="def post(\n    url, data=None, **kw\n):"),
        Def("pkg/api.py", "get", qualname="get", signature="def get(url):"),
    ]
    idx.other_imports["pkg/__init__.py"] = [
        Imp(("pkg/api.py",), ("get", "post", "put"), line=0, spec=".api"),
        Imp((), ("NullHandler",), line=1, spec="logging"),  # not the package's API
        Imp(("pkg/__version__.py",), ("__version__",), line=2, spec=".__version__"),
    ]
    text = "import pkg\n\n\n\n\n\n\n\n\n\n\nr = pkg.post(u)\n"
    chunk = next(c for c in gather_context(idx, "app.py", text, 11) if c.path == "pkg/__init__.py")
    assert chunk.text.splitlines() == ["def post(url, data=None, **kw):", "from .api import get, put"]


def test_a_name_imported_but_not_used_yet_is_shown_first_and_never_crowded_out() -> None:
    idx = index()
    idx.imports = [Imp(("pkg/__init__.py",), ("Big", "Used", "Fresh"), line=0, spec="pkg")]
    idx.outlines["pkg/__init__.py"] = []
    big = [Def("pkg/items.py", "Big", kind="class", qualname="Big", signature="class Big:")] + [
        Def(
            "pkg/items.py",
            f"m{i}",
            kind="method",
            qualname=f"Big.m{i}",
            scope="Big",
            signature=f"def m{i}(self, a_long_parameter_name: int, another_one: str) -> None:",
        )
        for i in range(40)
    ]
    fresh = Def("pkg/items.py", "Fresh", kind="class", qualname="Fresh", signature="class Fresh(Item):")
    idx.outlines["pkg/items.py"] = [*big, fresh]
    idx.other_imports["pkg/__init__.py"] = [Imp(("pkg/items.py",), ("Big", "Fresh", "Used"), spec=".items")]
    text = "from pkg import Big, Used, Fresh\n\nBig().m1()\nUsed()\nx = 1\nif isinstance(x, "
    chunk = next(c for c in gather_context(idx, "app.py", text, 5) if c.path == "pkg/__init__.py")
    assert chunk.text.startswith("class Fresh(Item):")  # only the masked line would use it
    assert "Used" in chunk.text  # names without a definition shown are still listed


def test_among_the_imports_a_name_used_but_not_imported_shows_where_it_is_defined() -> None:
    idx = index()
    logger = Def("pkg/log.py", "logger", kind="variable", qualname="logger", signature="logger = get()")
    local = Def("pkg/mod.py", "total", kind="variable", qualname="total", signature="total = 0")

    class WithDefinitions(FakeIndex):
        def definitions(self, name: str, limit: int = 50) -> list[Def]:
            return [d for d in (logger, local) if d.name == name]

    imports = [Imp(("util/dates.py",), ("parse",), line=0, spec="util.dates")]
    idx2 = WithDefinitions(outlines=idx.outlines, imports=imports)
    text = 'from util.dates import parse\nfrom \n\ntotal = parse("x")\nlogger.info("total")\n'
    chunks = gather_context(idx2, "app.py", text, 1)
    found = [c for c in chunks if "not imported" in c.reason]
    assert [(c.path, c.text) for c in found] == [("pkg/log.py", "logger = get()")]
    assert not any("not imported" in c.reason for c in gather_context(idx2, "app.py", text, 4))


def test_inside_a_long_parenthesised_import_the_module_shows_the_names_the_file_still_needs() -> None:
    idx = index()
    defs = [Def("util/dates.py", f"name{i}", signature=f"def name{i}(a, b, c, d, e, f):") for i in range(80)]
    idx.outlines["util/dates.py"] = defs
    idx.imports = [Imp(("util/dates.py",), ("name1", "name2"), line=0, spec="util.dates")]
    text = "from util.dates import (\n    name1,\n    name2,\n    \n)\n\nname1(name2(name77()))\n"
    chunk = next(c for c in gather_context(idx, "app.py", text, 3) if c.path == "util/dates.py")
    assert "among the imports" in chunk.reason
    assert chunk.text.startswith("def name77(")


def test_in_a_list_of_a_module_that_only_re_imports_names_those_names_are_the_choices() -> None:
    """requests' tests take ``Morsel`` from ``requests.compat``, which imports it from the standard
    library: no workspace file defines it, yet inside that list it is the line's only sound name."""
    from fimble.completion.context.imports import IMPORT_CHOICES, ImportChoices

    idx = index()
    idx.imports = [Imp(("pkg/compat.py",), ("Mapping",), line=0, spec="pkg.compat")]
    idx.other_imports = {"pkg/compat.py": [Imp((), ("Morsel", "Mapping"), line=0, spec="http.cookies")]}
    text = "from pkg.compat import (\n    \n    Mapping,\n)\n\nMorsel(Mapping())\n"
    chunks = gather_context(idx, "tests/test_x.py", text, 1)
    choices = next(ImportChoices.from_text(c.text) for c in chunks if c.reason == IMPORT_CHOICES)
    assert choices.modules["pkg.compat"] == ("Morsel",)
    below = "from pkg.compat import (\n    Mapping,\n)\n\n\nMorsel(Mapping())\n"
    assert not any(c.reason == IMPORT_CHOICES for c in gather_context(idx, "tests/test_x.py", below, 3))
    g = ContextGatherer(idx, region=10)  # one region: the prompt's chunks stay, the choices follow the list
    inside, after = g.chunks("tests/test_x.py", text, 1), g.chunks("tests/test_x.py", below, 3)
    shown = [c for c in inside if c.reason != IMPORT_CHOICES]
    assert len(after) == len(shown) and all(a is b for a, b in zip(after, shown, strict=True))
    assert any(c.reason == IMPORT_CHOICES for c in inside)


def test_entering_or_leaving_an_import_list_renews_the_choices_not_the_prompt() -> None:
    idx = index()
    g = ContextGatherer(idx, region=10)
    text = "from util.dates import (\n    parse,\n)\nimport os\n"
    inside = g.chunks("app.py", text, 1)
    once = idx.calls
    assert g.chunks("app.py", text, 1) is inside and idx.calls == once
    below = g.chunks("app.py", text, 3)  # (below the list: its names are no longer the line's choices)
    assert idx.calls == 2 * once
    assert below is not inside and all(a is b for a, b in zip(below, inside, strict=True))  # (cached)
    assert g.chunks("app.py", text, 3) is below


def test_a_variable_assigned_from_a_call_shows_the_class_it_returns() -> None:
    idx = index()
    cls = Def("util/dates.py", "Calendar", kind="class", qualname="Calendar", signature="class Calendar:")
    add = Def(
        "util/dates.py",
        "add",
        kind="method",
        qualname="Calendar.add",
        signature="def add(self):",
        scope="Calendar",
    )
    make = Def("util/dates.py", "make", qualname="make", signature="def make() -> Calendar:")
    idx.outlines["util/dates.py"].extend([cls, add, make])
    idx.near = Near(())
    chunks = gather_context(idx, "app.py", "from util.dates import make\ncal = make()\n\n\ncal.", 4)
    chunk = next(c for c in chunks if c.reason == "cal is a Calendar (from make)")
    assert chunk.text == "class Calendar:\n    def add(self): ..."
