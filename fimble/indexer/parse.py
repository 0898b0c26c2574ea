"""Tree-sitter extraction: one query walk per file yields its definitions and imports.

Everything language-specific comes from ``queries/<lang>.scm`` (what to capture) and
``data/languages.toml`` (comment node types, wrappers, depth limit); this module only interprets the
capture convention documented in ``queries/README.md``. Grammars, queries and parsers are created
lazily and cached per process (parsers per thread: a ``Parser`` is not thread-safe), so importing this
module is cheap and a worker process pays for the languages it meets only.

A language marked ``skeleton`` (Python) is parsed without its function bodies when the file is big
enough for that to pay (``skeleton.py``); its definitions nested in a function body are left out
whichever way it was parsed, so the index does not depend on a file's size.
"""

from __future__ import annotations

import functools
import importlib
import re
import threading
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from operator import itemgetter
from typing import NamedTuple

import tree_sitter as ts

from fimble.indexer.languages import LanguageSpec, language_spec
from fimble.indexer.records import DefRecord
from fimble.indexer.skeleton import Skeleton, skeleton

__all__ = ["Extraction", "ParsedDef", "ParsedImport", "extract", "parser", "query_source", "warm"]

_MAX_SIGNATURE_LINES = 8
_MAX_SIGNATURE_CHARS = 400
_MAX_DOC_CHARS = 200
_CLASSLIKE = frozenset({"class", "struct", "interface", "trait", "enum", "impl", "type"})
# When two patterns capture the same node under one name, the more specific kind wins.
_KIND_RANK = {"variable": 0, "constant": 1, "prototype": 2}
_COMMENT_MARKERS = re.compile(r"^\s*(?:/\*+!?|\*+/|\*+|//+!?|#+!?|--|;+)?\s?")
_COMMENT_END = re.compile(r"\s*\*+/\s*$")
_COMMENT_STARTS = ("#", "//", "/*", "*", "--")
_ALNUM = re.compile(r"[^\W_]")  # what str.isalnum accepts: a word character but "_"
_STRING_PREFIX = re.compile(r"^[rRbBuUfF]{0,2}(\"\"\"|'''|\"|')")
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_SKELETON = "#skeleton"  # the parser key of a language's skeleton parser
# Below this size, scanning for the bodies costs more than parsing them (stdlib: even at ~8 KB).
_SKELETON_MIN_BYTES = 8192


# A definition as found in one file is the record the store keeps (lines and columns 0-based, columns in
# UTF-8 bytes): the worker stores it as is, ``tuple(d)``, without per-field copying.
ParsedDef = DefRecord


@dataclass(frozen=True, slots=True)
class ParsedImport:
    """One import as written: ``flavor`` is ``module`` (import X), ``from`` (from X import names) or
    ``mod`` (Rust ``mod x;``); ``spec`` has quotes stripped; ``line`` is 0-based."""

    flavor: str
    spec: str
    names: tuple[str, ...]
    line: int
    wildcard: bool = False


@dataclass(frozen=True, slots=True)
class Extraction:
    definitions: tuple[ParsedDef, ...]
    imports: tuple[ParsedImport, ...]
    has_errors: bool


class _Found(NamedTuple):
    """One definition (or Rust ``impl`` scope) as matched; sorted by (start, -end): outer ones first."""

    start: int
    neg_end: int
    kind: str
    name: str
    node: ts.Node
    caps: dict[str, list[ts.Node]]
    is_scope: bool


def query_source(spec: LanguageSpec) -> str:
    """The text of a language's query files (kept next to the code as ``queries/<name>.scm``), joined:
    JavaScript and TypeScript share their binding and import patterns in one file."""
    folder = resources.files("fimble.indexer.queries")
    return "\n".join(folder.joinpath(name).read_text("utf-8") for name in spec.queries)


@functools.cache
def _grammar(name: str) -> tuple[ts.Language, ts.Query]:
    spec = language_spec(name)
    if spec is None:
        raise ValueError(f"no grammar for language {name!r}")
    module, func = spec.grammar.split(":")
    language = ts.Language(getattr(importlib.import_module(module), func)())
    return language, ts.Query(language, query_source(spec))


def warm(language: str) -> None:
    """Load a grammar and compile its query ahead of the first file that needs them."""
    _parser(language)


_local = threading.local()


def parser(language: str) -> ts.Parser:
    """This thread's cached parser for ``language`` (a name from data/languages.toml).

    The completion side parses a window around the cursor with it, sharing the grammars loaded here.
    Raises ``ValueError`` for a language without a grammar.
    """
    return _parser(language)


def _parser(name: str) -> ts.Parser:
    parsers: dict[str, ts.Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(name)
    if parser is None:
        parser = parsers[name] = ts.Parser(_grammar(name.removesuffix(_SKELETON))[0])
    return parser


# pattern index -> its role: "import", the "def.<kind>" capture, or "" (a scope), per language
_roles: dict[str, dict[int, str]] = {}


def _role(caps: dict[str, list[ts.Node]]) -> str:
    if "import" in caps:
        return "import"
    return next((key for key in caps if key.startswith("def.")), "")


def extract(language: str, source: bytes) -> Extraction:
    """Definitions and imports of ``source`` (raw bytes; invalid UTF-8 is tolerated by tree-sitter)."""
    spec = language_spec(language)
    if spec is None:
        return Extraction((), (), False)
    _, query = _grammar(language)
    tree, skel = _parse_tree(language, source, _skeleton_of(spec, source))
    root = tree.root_node
    cursor = ts.QueryCursor(query)
    cursor.set_max_start_depth(spec.max_depth)
    found: dict[tuple[int, int, str], _Found] = {}
    imports: dict[tuple[int, str, str], list] = {}
    roles = _roles.setdefault(language, {})
    rank = _KIND_RANK.get
    moved: dict[int, tuple[int, int, int]] = {}  # skeleton end byte -> original (row, column, byte)
    for index, caps in cursor.matches(root):
        role = roles.get(index)
        if role is None or (role and role not in caps):  # a role is fixed per pattern; checked anyway
            role = roles[index] = _role(caps)
        if role == "import":
            _collect_import(caps, imports)
            continue
        names = caps.get("name")
        if not names:
            continue
        if role:
            node, kind, is_scope = caps[role][0], role[4:], False
        else:
            scopes = caps.get("scope")
            if not scopes:
                continue
            node, kind, is_scope = scopes[0], "impl", True
        name_node = names[0]
        name = source[name_node.start_byte : name_node.end_byte].decode("utf-8", "replace")
        start, end = node.start_byte, node.end_byte
        key = (start, end, name)
        old = found.get(key)
        if old is None or rank(old.kind, 9) < rank(kind, 9):
            found[key] = _new(_Found, (start, -end, kind, name, node, caps, is_scope))
    items = list(found.values())
    if skel is not None:
        moved = _real_ends(skel, items)
    if moved:  # cut bodies: give their functions (and classes ending with one) their real end
        get = moved.get
        items = [
            item if (real := get(-item.neg_end)) is None else _new(_Found, (item[0], -real[2], *item[2:]))
            for item in items
        ]
    items.sort(key=_order)
    definitions = _resolve_scopes(spec, source, items, moved)
    return Extraction(tuple(definitions), _finish_imports(imports), root.has_error)


_order = itemgetter(0, 1)
# NamedTuple constructors are Python functions; tuple.__new__ builds the same object without one
# call frame per definition (tens of thousands per second of indexing).
_new = tuple.__new__


def _real_ends(skel: Skeleton, items: Iterable[_Found]) -> dict[int, tuple[int, int, int]]:
    """Skeleton end byte -> original (row, column, byte) of the definitions that end inside a cut
    function: from its ``def`` to its last cut byte. Only that function, or one containing it (a
    class, maybe nested beyond the query's depth limit), can end there, and it ends where that
    function really ends."""
    heads = list(skel.ends)  # in file order
    cuts = list(skel.ends.values())
    moved: dict[int, tuple[int, int, int]] = {}
    for item in items:
        end = -item.neg_end
        at = bisect_right(heads, end) - 1
        if at >= 0 and heads[at] < end <= cuts[at][0]:
            moved[end] = cuts[at][1:]
    return moved


def _skeleton_of(spec: LanguageSpec, source: bytes) -> Skeleton | None:
    return skeleton(source) if spec.skeleton and len(source) >= _SKELETON_MIN_BYTES else None


def _parse_tree(language: str, source: bytes, skel: Skeleton | None) -> tuple[ts.Tree, Skeleton | None]:
    """The tree of ``source``, parsed without the gaps of ``skel`` when there is one, and the
    skeleton actually used: None after a syntax error in the cut parse (a real one, or a misread
    of the scan), when the whole file is parsed instead."""
    if skel is not None:
        tree = _parse_skeleton(language, source, skel)
        if not tree.root_node.has_error:
            return tree, skel
    return _parser(language).parse(source), None


def _parse_skeleton(language: str, source: bytes, skel: Skeleton) -> ts.Tree:
    """Parse a skeleton: everything but its gaps (``included_ranges``), which the lexer never reads.
    A parser of its own, so the shared one (``parser()``) never keeps these ranges."""
    parser = _parser(language + _SKELETON)
    ranges: list[ts.Range] = []
    at, at_point = 0, ts.Point(0, 0)
    for start, start_row, start_col, end, end_row, end_col in skel.gaps:
        ranges.append(ts.Range(at_point, ts.Point(start_row, start_col), at, start))
        at, at_point = end, ts.Point(end_row, end_col)
    if at < len(source):  # (a file may end inside a cut body)
        eof = ts.Point(source.count(b"\n"), len(source) - source.rfind(b"\n") - 1)
        ranges.append(ts.Range(at_point, eof, at, len(source)))
    parser.included_ranges = ranges
    return parser.parse(skel.source)


def _text(source: bytes, node: ts.Node) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _resolve_scopes(
    spec: LanguageSpec, source: bytes, items: list[_Found], moved: dict[int, tuple[int, int, int]]
) -> list[ParsedDef]:
    """Give each definition its enclosing scope (by range nesting) and its qualified name; ``moved``
    maps the end byte of a skeleton's node to the original end (row, column, byte)."""
    sep = spec.separator
    wrappers = spec.wrappers
    nested_ok = not spec.skeleton  # else what a function body defines is left out, parsed or not
    stack: list[tuple[int, str, str, bool]] = []  # (end_byte, qualname, kind, inside a function)
    out: list[ParsedDef] = []
    for start, neg_end, item_kind, name, node, caps, is_scope in items:
        while stack and stack[-1][0] <= start:
            stack.pop()
        parent_q, parent_kind, hidden = stack[-1][1:] if stack else ("", "", False)
        receiver_nodes = caps.get("receiver")
        receiver = _TEMPLATE_ARGS.sub("", _text(source, receiver_nodes[0])) if receiver_nodes else ""
        if sep in name:  # C++ `A::B::f` captured whole: the prefix is part of the scope
            head, _, name = name.rpartition(sep)
            receiver = f"{receiver}{sep}{head}" if receiver else head
        if receiver:
            scope = f"{parent_q}{sep}{receiver}" if parent_q else receiver
            scope_kind = "class"
        else:
            scope, scope_kind = parent_q, parent_kind
        qualname = f"{scope}{sep}{name}" if scope else name
        hidden = hidden or (parent_kind == "function" and not nested_ok)
        stack.append((-neg_end, qualname, item_kind, hidden))
        if is_scope or hidden:
            continue
        kind = "method" if item_kind == "function" and scope_kind in _CLASSLIKE else item_kind
        outer = _outer(wrappers, node) if wrappers else node
        start_row, start_col = node.start_point
        real_end = moved.get(node.end_byte) if moved else None
        end_row, end_col = real_end[:2] if real_end is not None else node.end_point
        doc_nodes = caps.get("doc")
        doc = _docstring(source, doc_nodes[0]) if doc_nodes else _comment_doc(spec, source, outer)
        body_nodes = caps.get("body")
        signature = _signature(source, outer, node, body_nodes[0] if body_nodes else None)
        record = (kind, name, qualname, scope, start_row, start_col, end_row, end_col, signature, doc)
        out.append(_new(ParsedDef, record))
    return out


def _outer(wrappers: frozenset[str], node: ts.Node) -> ts.Node:
    """The wrapper (decorators, ``export``, ``template<>``, ``type (...)``) that owns this definition,
    unless the wrapper holds several definitions like it (a grouped Go ``type ( A; B )``)."""
    outer = node
    parent = node.parent
    while parent is not None and parent.type in wrappers:
        if sum(1 for child in parent.named_children if child.type == outer.type) > 1:
            break
        outer, parent = parent, parent.parent
    return outer


def _signature(source: bytes, outer: ts.Node, node: ts.Node, body: ts.Node | None) -> str:
    """The header of a definition: from its start (wrapper included) to its body, or its first line."""
    start = outer.start_byte
    if body is not None and body.start_byte > start:
        end = body.start_byte
    else:
        newline = source.find(b"\n", node.start_byte, node.end_byte)
        end = node.end_byte if newline < 0 else newline
    raw = source[start:end].rstrip()
    if b"\n" not in raw:  # the common case: a one-line header
        text = raw.decode("utf-8", "replace")
        return text if len(text) <= _MAX_SIGNATURE_CHARS else text[: _MAX_SIGNATURE_CHARS - 1] + "…"
    lines = [line.rstrip() for line in raw.decode("utf-8", "replace").split("\n")]
    while len(lines) > 1 and lines[-1].lstrip().startswith(_COMMENT_STARTS):
        lines.pop()  # a comment between the header and the first statement is not the header
    indent = outer.start_point.column
    lines = [lines[0], *(_dedent(line, indent) for line in lines[1:_MAX_SIGNATURE_LINES])]
    text = "\n".join(lines)
    if len(text) > _MAX_SIGNATURE_CHARS:
        text = text[: _MAX_SIGNATURE_CHARS - 1] + "…"
    return text


def _dedent(line: str, indent: int) -> str:
    """Continuation lines of a nested header lose the indentation of the header's first line."""
    return line[indent:] if line[:indent].isspace() else line


def _first_line(text: str) -> str:
    """The first line with a letter or digit, comment markers stripped (lines are cut one at a
    time: a docstring can be long and its first line is usually the one)."""
    start = 0
    while True:
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        line = _COMMENT_END.sub("", _COMMENT_MARKERS.sub("", line, count=1)).strip()
        if _ALNUM.search(line):
            return line[:_MAX_DOC_CHARS]
        if end < 0:
            return ""
        start = end + 1


def _docstring(source: bytes, node: ts.Node) -> str:
    text = _text(source, node)
    match = _STRING_PREFIX.match(text)
    if match:
        quote = match.group(1)
        text = text[match.end() :]
        if text.endswith(quote):
            text = text[: -len(quote)]
    return _first_line(text)


def _comment_doc(spec: LanguageSpec, source: bytes, outer: ts.Node) -> str:
    """The first line of the comment block right above a definition (no blank line between)."""
    prev = outer.prev_named_sibling
    row = outer.start_point.row
    while prev is not None and prev.type in spec.doc_skip:
        row = prev.start_point.row
        prev = prev.prev_named_sibling
    if prev is None or prev.type not in spec.comments or prev.end_point.row < row - 1 or _trailing(prev):
        return ""
    first = prev
    while True:
        above = first.prev_named_sibling
        if (
            above is None
            or above.type not in spec.comments
            or above.end_point.row < first.start_point.row - 1
            or _trailing(above)
        ):
            break
        first = above
    return _first_line(_text(source, first))


def _trailing(comment: ts.Node) -> bool:
    """A comment that ends a line of code (``x = 1  # note``) documents that line, not what follows."""
    before = comment.prev_sibling
    return before is not None and before.end_point.row == comment.start_point.row


def _collect_import(caps: dict[str, list[ts.Node]], out: dict[tuple[int, str, str], list]) -> None:
    stmt = caps["import"][0]
    if "import.from" in caps:
        flavor, spec_nodes = "from", caps["import.from"]
    elif "import.mod" in caps:
        flavor, spec_nodes = "mod", caps["import.mod"]
    else:
        flavor, spec_nodes = "module", caps.get("import.module", ())
    for spec_node in spec_nodes:
        raw = spec_node.text or b""
        spec = raw.decode("utf-8", "replace").strip().strip("\"'`<>")
        if not spec:
            continue
        entry = out.setdefault((stmt.start_byte, flavor, spec), [stmt.start_point.row, [], False])
        for name_node in caps.get("import.name", ()):
            name = (name_node.text or b"").decode("utf-8", "replace")
            if name and name not in entry[1]:
                entry[1].append(name)
        if "import.wildcard" in caps:
            entry[2] = True


def _finish_imports(raw: dict[tuple[int, str, str], list]) -> tuple[ParsedImport, ...]:
    out: list[ParsedImport] = []
    for (_, flavor, spec), (line, names, wildcard) in raw.items():
        spec, names, wildcard = _split_use_list(spec, names, wildcard)
        out.append(ParsedImport(flavor, spec, tuple(names), line, wildcard))
    return tuple(out)


def _split_use_list(spec: str, names: list[str], wildcard: bool) -> tuple[str, list[str], bool]:
    """Rust ``use a::b::{C, D as E}`` / ``use a::*`` / ``use a::b as c``: path, names, wildcard."""
    if " as " in spec and "{" not in spec:
        spec = spec.split(" as ", 1)[0].strip()
    if spec.endswith("::*"):
        return spec[:-3], names, True
    brace = spec.find("::{")
    if brace >= 0:
        inner = spec[brace + 3 :].rstrip("}")
        listed = [part.strip().split(" as ")[0].split("::")[-1] for part in inner.split(",")]
        return spec[:brace], names + [n for n in listed if n and n not in ("*", "self")], "*" in inner
    return spec, names, wildcard
