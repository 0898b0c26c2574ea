"""skeleton.py: Python function bodies cut out of the parse, with the same index content.

Each fixture in ``fixtures/skeleton`` (and variants made here: tabs, CRLF, invalid UTF-8, a form feed)
is extracted twice, with the cut parse and with a whole parse, and the definitions and imports must be
identical; the cut must also really skip the bodies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fimble.indexer import parse
from fimble.indexer.parse import Extraction, extract
from fimble.indexer.skeleton import skeleton

FIXTURES = Path(__file__).parent / "fixtures" / "skeleton"


@pytest.fixture(autouse=True)
def _every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are small: cut them anyway (real files are cut from 8 KB up)."""
    monkeypatch.setattr(parse, "_SKELETON_MIN_BYTES", 0)


def _whole(monkeypatch: pytest.MonkeyPatch, data: bytes) -> Extraction:
    with monkeypatch.context() as patch:
        patch.setattr(parse, "skeleton", lambda data: None)
        return extract("python", data)


def _same(monkeypatch: pytest.MonkeyPatch, data: bytes) -> Extraction:
    """Extract ``data`` both ways, check that the results agree and that bodies were cut."""
    skel = skeleton(data)
    assert skel is not None and skel.gaps
    assert len(skel.source) == len(data)
    cut = extract("python", data)
    whole = _whole(monkeypatch, data)
    assert not cut.has_errors and not whole.has_errors
    assert cut.definitions == whole.definitions
    assert sorted(map(repr, cut.imports)) == sorted(map(repr, whole.imports))
    return cut


def _names(found: Extraction) -> dict[str, str]:
    return {d.qualname: d.kind for d in found.definitions}


@pytest.mark.parametrize("name", ["strings.py", "signatures.py", "nesting.py"])
def test_fixture_same_as_whole_parse(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    _same(monkeypatch, (FIXTURES / name).read_bytes())


def test_strings_with_code_at_column_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _same(monkeypatch, (FIXTURES / "strings.py").read_bytes())
    assert _names(found) == {
        "TEMPLATE": "constant",
        "render": "function",
        "after_strings": "function",
        "Holder": "class",
        "Holder.method": "method",
        "Holder.second": "method",
    }
    defs = {d.qualname: d for d in found.definitions}
    assert defs["render"].doc == "Render a template."
    assert defs["after_strings"].doc.startswith("Raw docstring")
    # the body ends at its last line, not at the cut: the original end is restored
    source = (FIXTURES / "strings.py").read_text().split("\n")
    assert source[defs["render"].end_line].strip().startswith("return text.format")
    assert source[defs["Holder.method"].end_line].strip() == "'''"
    assert source[defs["Holder"].end_line].strip() == "return 2"


def test_signatures_decorators_async_continuations(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _same(monkeypatch, (FIXTURES / "signatures.py").read_bytes())
    defs = {d.qualname: d for d in found.definitions}
    assert set(defs) == {
        "multi_line",
        "decorated",
        "fetch",
        "continued",
        "one_liner",
        "with_lambda",
        "last_statement_is_bracketed",
        "documented_by_comment",
    }
    assert defs["multi_line"].signature.endswith("]:")
    assert defs["multi_line"].doc == "Signature over many lines."
    assert defs["decorated"].signature.startswith("@functools.lru_cache(maxsize=None)\n@staticmethod\n")
    assert defs["fetch"].signature == "async def fetch(url):"
    assert defs["documented_by_comment"].doc == "documents the function below"


def test_nested_definitions_are_left_out_and_local_imports_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (FIXTURES / "nesting.py").read_bytes()
    found = _same(monkeypatch, data)
    assert _names(found) == {
        "outer": "function",
        "Outer": "class",
        "Outer.Inner": "class",
        "Outer.Inner.deep": "method",
        "Outer.method": "method",
        "Outer.windows_only": "method",
        "first_statement_is_import": "function",
        "first_statement_is_compound": "function",
        "ends_the_file": "function",
    }
    names = _names(found)
    for hidden in ("outer.inner", "outer.Local", "outer.Local.method", "Outer.method.helper"):
        assert hidden not in names
    imports = {(i.spec, i.names, i.line) for i in found.imports}
    lines = data.decode().split("\n")
    shutil_line = next(n for n, text in enumerate(lines) if "import shutil" in text)
    assert ("shutil", (), shutil_line) in imports
    assert ("collections", ("OrderedDict", "defaultdict"), 8) in imports
    assert ("json", (), 7) in imports
    assert ("os", (), 2) in imports


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(lambda text: text.replace("    ", "\t"), id="tabs"),
        pytest.param(lambda text: text.replace("\n", "\r\n"), id="crlf"),
        pytest.param(lambda text: text.replace("comment\n", "comment  \t \n"), id="comment-trailing-spaces"),
    ],
)
@pytest.mark.parametrize("name", ["strings.py", "signatures.py", "nesting.py"])
def test_variants(monkeypatch: pytest.MonkeyPatch, name: str, variant) -> None:
    _same(monkeypatch, variant((FIXTURES / name).read_text()).encode())


def test_file_ending_inside_a_cut_body(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (FIXTURES / "nesting.py").read_bytes().rstrip()
    found = _same(monkeypatch, data)
    assert found.definitions[-1].name == "ends_the_file"


def test_invalid_utf8(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (FIXTURES / "nesting.py").read_bytes()
    data = data.replace(b'"""Has nested definitions."""', b'"""Has \xff\xfe nested \xc3 definitions."""')
    data = data.replace(b"return x\n", b"return x  # \xe9\xff\n", 1)
    found = _same(monkeypatch, data)
    assert "outer" in _names(found)


def test_unsure_files_are_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A form feed in an indentation, a lone carriage return or unbalanced brackets: no skeleton,
    and the whole parse gives what it always gave."""
    text = (FIXTURES / "nesting.py").read_text()
    feed = text.replace(
        "\n    def method(self):\n        def helper", "\n\f    def method(self):\n        def helper"
    )
    assert skeleton(feed.encode()) is None
    assert extract("python", feed.encode()).definitions == _whole(monkeypatch, feed.encode()).definitions
    assert skeleton(text.replace("\n", "\r").encode()) is None
    assert skeleton((text + "\nx = (\n").encode()) is None


def test_syntax_error_falls_back_to_a_whole_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (FIXTURES / "signatures.py").read_bytes() + b"\ndef broken(:\n    pass\n"
    found = extract("python", data)
    assert found.has_errors
    assert found.definitions == _whole(monkeypatch, data).definitions


def test_one_statement_bodies_and_no_functions_are_not_cut() -> None:
    assert skeleton(b"x = 1\nclass A:\n    y = 2\n") is None
    assert skeleton(b"def f():\n    return 1\n\ndef g(): return 2\n") is None


def test_the_shared_parser_is_untouched() -> None:
    """The completion side parses with ``parser()``: the cut parse's ranges must not stick to it."""
    extract("python", (FIXTURES / "nesting.py").read_bytes())
    tree = parse.parser("python").parse(b"def f():\n    x = 1\n    return x\n")
    block = tree.root_node.children[0].child_by_field_name("body")
    assert block is not None and len(block.named_children) == 2


def test_classes_ending_with_a_method_too_deep_for_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Counter.__next__`` starts below the query's depth limit, so it is not a definition; the
    classes around it still end where its body ends, not at the cut."""
    data = b"""x = 1


class jaraco:
    class itertools:
        class Counter:
            def __iter__(self):
                return self

            def __next__(self):
                result = next(self._orig_iter)
                self.count += 1
                return result


def after():
    return 1
"""
    found = _same(monkeypatch, data)
    ends = {d.qualname: (d.end_line, d.end_col) for d in found.definitions}
    assert ends["jaraco"] == ends["jaraco.itertools.Counter"] == (12, 29)
