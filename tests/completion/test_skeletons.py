"""Class skeletons and receiver guesses over plain definitions."""

from __future__ import annotations

from dataclasses import dataclass

from fimble.completion.context.skeletons import (
    class_skeleton,
    guess_receivers,
    members_by_class,
    one_line,
    returned_classes,
)


@dataclass(frozen=True)
class D:
    name: str
    signature: str
    kind: str = "method"
    scope: str = "Box"
    doc: str = ""
    path: str = "box.py"

    @property
    def qualname(self) -> str:
        return f"{self.scope}.{self.name}" if self.scope else self.name


BOX = D("Box", "class Box(Base):", kind="class", scope="", doc="Holds things.")
METHODS = [
    D("__init__", "def __init__(\n    self,\n    size: int = 1,\n) -> None:"),
    D("_secret", "def _secret(self):"),
    D("put", "def put(self, item):"),
    D("take", "@t.overload\ndef take(self) -> int:"),
    D("take", "@t.overload\ndef take(self, n: int) -> list[int]:"),
    D("size", "@property\ndef size(self) -> int:"),
]


def test_one_line_collapses_parameters_and_keeps_decorators_but_overload() -> None:
    assert one_line(METHODS[0].signature) == "def __init__(self, size: int = 1) -> None:"
    assert one_line(METHODS[3].signature) == "def take(self) -> int:"
    assert one_line(METHODS[5].signature) == "@property\ndef size(self) -> int:"
    route = "@setupmethod\ndef route(self, rule: str):"
    assert one_line(route) == route


def test_a_long_signature_is_cut_after_a_whole_parameter() -> None:
    sig = "def f(" + ", ".join(f"a{i}: int = {i}" for i in range(30)) + ") -> bool:"
    short = one_line(sig, limit=60)
    assert short.endswith(", ...) -> bool:") and len(short) <= 60
    assert short.startswith("def f(a0: int = 0, a1: int = 1")


def test_a_skeleton_lists_public_methods_once_wanted_ones_first() -> None:
    text = class_skeleton(BOX, METHODS, {"take"})
    assert text.splitlines() == [
        "class Box(Base):",
        '    """Holds things."""',
        "    def take(self) -> int: ...",
        "    def __init__(self, size: int = 1) -> None: ...",
        "    def put(self, item): ...",
        "    @property",
        "    def size(self) -> int: ...",
    ]
    assert len(class_skeleton(BOX, METHODS * 20, limit_chars=120)) <= 120


def test_members_are_grouped_by_class_and_receivers_guessed_by_the_methods_called() -> None:
    classes = members_by_class([BOX, *METHODS, D("open", "def open(self):", scope="Door")])
    assert set(classes) == {"Box", "Door"}
    text = "b.put(1)\nb.take()\nd.open()\nself.put(2)\n"
    assert guess_receivers(text, classes) == [("b", "Box", 2)]
    assert guess_receivers(text, classes, min_hits=1)[1] == ("d", "Door", 1)


def test_a_skeleton_shows_fields_and_init_attributes_when_its_source_is_readable() -> None:
    from fimble.indexer.types import Span

    lines = [
        "@dataclass",
        "class Box(Base):",
        '    """Holds things."""',
        "    size: int = 1",
        "    label: str = ''",
        "    def __init__(self, size: int = 1) -> None:",
        "        self.items = []",
        "    def put(self, item):",
        "        pass",
    ]

    @dataclass(frozen=True)
    class S(D):
        span: Span | None = None

    header = "@dataclass\nclass Box(Base):"
    box = S("Box", header, kind="class", scope="", doc="Holds things.", span=Span(0, 0, 8, 0))
    init = S("__init__", "def __init__(self, size: int = 1) -> None:", span=Span(5, 4, 6, 0))
    put = S("put", "def put(self, item):", span=Span(7, 4, 8, 0))
    text = class_skeleton(box, [init, put], {"put"}, source=lambda path: lines)
    assert text.splitlines() == [
        "@dataclass",
        "class Box(Base):",
        '    """Holds things."""',
        "    def put(self, item): ...",
        "    size: int = 1",
        "    label: str = ''",
        "    def __init__(self, size: int = 1) -> None:",
        "        self.items = []",
    ]
    assert "    size: int = 1" not in class_skeleton(box, [init, put], source=lambda path: [])
    assert "self.items" not in class_skeleton(box, [init, put])


def test_a_variable_assigned_from_a_call_gets_the_class_the_callee_returns() -> None:
    sig = "@classmethod\ndef run_streamed(\n    cls, agent\n) -> RunResult:"
    run = D("run_streamed", sig, scope="Runner")
    get = D("get", "def get() -> Optional[Box]:", kind="function", scope="")
    other = D("make", "def make() -> list[Box]:", kind="function", scope="")
    callables = {"run_streamed": [run], "Box": [BOX], "get": [get], "make": [other]}
    text = (
        "result = Runner.run_streamed(agent)\nb = Box()\nc: Box | None = get()\n"
        "d = Other.run_streamed()\ne = make()\n"
    )
    assert returned_classes(text, callables, {"RunResult", "Box"}) == [
        ("c", "Box", "get"),
        ("b", "Box", "Box"),
        ("result", "RunResult", "Runner.run_streamed"),
    ]
