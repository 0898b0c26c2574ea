"""The syntax at the cursor: one line or a block, and what the text after the cursor already closes.

A suggestion's shape decides its cost (a block is many tokens at ~35 ms each) and what the user
wants: at the end of ``def f():`` or ``if (x) {`` a body, mid-expression the rest of the line. The
decision reads the tree-sitter tokens around the cursor, so brackets and colons inside strings and
comments do not count. Only a window of the document is parsed (from a top-level line above the
cursor to a few lines below), which keeps this at a few milliseconds on any file size.
One module past 400 lines because the per-language rules (``data/shape.toml``) and the token walk
that applies them are one algorithm.

The same walk gives the stop rules what they need to balance a suggestion against the suffix: the
brackets open at the cursor, how many of them the suffix closes, and the quote of a string the cursor
sits in. Per-language facts are data (``data/shape.toml``); languages without a grammar fall back to
a text heuristic.
"""

from __future__ import annotations

import functools
import re
import time
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from fimble.completion.output.stops import StopContext

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = [
    "CursorSyntax",
    "ShapeSpec",
    "analyze",
    "resolve_language",
    "shape_spec",
    "stop_context",
    "text_heuristic",
]

_WINDOW_BACK_LINES = 60  # furthest a window starts above the cursor (looking for a top-level line)
_WINDOW_MIN_LINES = 30  # without a top-level line, this many lines above the cursor
_WINDOW_AHEAD_LINES = 24
_WINDOW_CHARS = 8000  # per side: one huge (minified) line must not make parsing slow
# A line holding only a literal's closing quotes and what may follow them: ``"""``, ``""")``, `` `; ``.
_STRING_END = re.compile(r"""(\"\"\"|'''|`)[\s)\]},;.]*$""")


@dataclass(frozen=True)
class ShapeSpec:
    """One language's facts from ``data/shape.toml`` (see its header)."""

    brackets: dict[str, str]
    block_openers: frozenset[str]
    blocks: frozenset[str]
    header_keywords: frozenset[str]
    strings: frozenset[str]
    comments: frozenset[str]

    @property
    def closers(self) -> dict[str, str]:
        return {close: open_ for open_, close in self.brackets.items()}


@functools.cache
def _table() -> dict[str, dict[str, list[str]]]:
    text = resources.files("fimble.completion.data").joinpath("shape.toml").read_text("utf-8")
    return tomllib.loads(text)


@functools.cache
def shape_spec(language: str) -> ShapeSpec:
    """The facts of ``language``, [default] filling what it does not say."""
    table = _table()
    merged = {**table["default"], **table.get(language, {})}
    return ShapeSpec(
        brackets={pair[0]: pair[1] for pair in merged["brackets"]},
        block_openers=frozenset(merged["block_openers"]),
        blocks=frozenset(merged["blocks"]),
        header_keywords=frozenset(merged["header_keywords"]),
        strings=frozenset(merged["strings"]),
        comments=frozenset(merged["comments"]),
    )


def resolve_language(language: str | None, path: str | None) -> str | None:
    """A parsed language name from an editor's language id or, failing that, the file name."""
    from fimble.indexer.languages import TEXT, detect_language, language_spec

    if language and language_spec(language.lower()) is not None:
        return language.lower()
    aliases = {"typescriptreact": "tsx", "javascriptreact": "javascript", "c++": "cpp"}
    if language and (alias := aliases.get(language.lower())):
        return alias
    if path:
        found = detect_language(path)
        return None if found == TEXT else found
    return None


@dataclass(frozen=True)
class CursorSyntax:
    """What the code around the cursor says about the suggestion it wants."""

    multiline: bool
    reason: str  # why, in a few words (shown by `fimble explain` and `fimble.status`)
    open_brackets: str = ""  # brackets open at the cursor, outermost first, e.g. "(["
    closed_in_suffix: int = 0  # how many of them (innermost first) the text after the cursor closes
    string_quote: str = ""  # closing delimiter of the string the cursor is in, when it follows on the line
    block_indent: int | None = None  # lines indented less leave the cursor's block (None: cursor line's)
    prose: bool = False  # the cursor is in a string or a comment: its indentation is the writer's
    language: str | None = None
    parse_ms: float = 0.0


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def text_heuristic(prefix: str, suffix: str) -> tuple[bool, str]:
    """The decision for text without a grammar: block on an empty line or after an opener."""
    line_prefix = prefix[prefix.rfind("\n") + 1 :]
    if _first_line(suffix).strip():
        return False, "text after the cursor"
    if not line_prefix.strip():
        return True, "empty line"
    if line_prefix.rstrip().endswith((":", "{", "(", "[", "=>", "->", " do", " then")):
        return True, "line opens a block"
    return False, "end of a line"


def _window(prefix: str, suffix: str) -> tuple[str, str]:
    """The text parsed: from a top-level line above the cursor to a few lines below it.

    Starting at a line with no indentation lets the parser see whole statements (an indented first
    line is an error for Python's grammar); the line must not start with a closer, which would be
    the end of an enclosing construct. Nor may it be a literal's closing line (the triple quotes
    ending a module-level message, a template literal's `` `; ``): parsed from there, the quotes would open a
    string that swallows the cursor (flask's ``ContextVar(|`` under such a message was judged inside a
    string with no bracket open, and its ``)`` was cut). The search skips to the line that opens it.
    (Counted in the window's text only: a literal opened further up is guessed from what is there.)
    """
    lines = prefix[-_WINDOW_CHARS:].split("\n")
    start = max(0, len(lines) - _WINDOW_MIN_LINES)
    lowest = max(-1, len(lines) - 2 - _WINDOW_BACK_LINES)
    i = len(lines) - 2
    while i > lowest:
        line = lines[i]
        end = _STRING_END.match(line)
        # Only a closing one: quotes that open a literal (a module docstring's first line) come after
        # an even number of their kind.
        if end and sum(above.count(end[1]) for above in lines[:i]) % 2:
            opener = next((j for j in range(i - 1, lowest, -1) if end[1] in lines[j]), None)
            if opener is None:  # opened out of reach: after it is the best there is
                start = i + 1
                break
            i, line = opener, lines[opener]  # the opening line may start the window itself
        if line and not line[0].isspace() and line[0] not in ")]}":
            start = i
            break
        i -= 1
    head = "\n".join(lines[start:])
    tail = "\n".join(suffix[:_WINDOW_CHARS].split("\n")[:_WINDOW_AHEAD_LINES])
    return head, tail


def _leaves(root: Node) -> list[Node]:
    """Every real token of the tree in order (zero-width and MISSING nodes skipped)."""
    out: list[Node] = []
    cursor = root.walk()
    while True:
        node = cursor.node
        if node.child_count == 0:
            if node.end_byte > node.start_byte and not node.is_missing:
                out.append(node)
        elif cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return out


def _foreign_closer(spec: ShapeSpec, leaf: Node) -> bool:
    """Whether a closing token ends a construct some other token opened: the ``}`` of a template
    substitution opened by ``${`` (JavaScript, TypeScript), or any opener spelled with more than the
    bracket (``#{``, ``$(``, ``\\(``).

    Matched by kind alone, that ``}`` would close the ``{`` of the enclosing function in the prefix (and
    every bracket opened after it), or count as the suffix closing one: the bracket rule would then cut
    a closing bracket the line needs. The parser pairs them: the opener is the first child of the
    closer's parent (outside error recovery, where the tree says nothing).
    """
    parent = leaf.parent
    if parent is None or parent.type == "ERROR" or parent.child_count == 0:
        return False
    first = parent.child(0)
    want = spec.closers[leaf.type]
    return first is not None and first.type != want and first.type.endswith(want)


def _brackets(spec: ShapeSpec, before: list[Node], after: list[Node]) -> tuple[list[Node], int]:
    """Opener tokens still open at the cursor (outermost first) and how many the suffix closes."""
    closers = spec.closers
    stack: list[Node] = []
    before = [leaf for leaf in before if leaf.type not in closers or not _foreign_closer(spec, leaf)]
    after = [leaf for leaf in after if leaf.type not in closers or not _foreign_closer(spec, leaf)]
    for leaf in before:
        if leaf.type in spec.brackets:
            stack.append(leaf)
        elif leaf.type in closers:
            want = closers[leaf.type]
            for i in range(len(stack) - 1, -1, -1):
                if stack[i].type == want:
                    del stack[i:]
                    break
    pending = [leaf.type for leaf in stack]
    local: list[str] = []
    closed = 0
    for leaf in after:
        if leaf.type in spec.brackets:
            local.append(leaf.type)
        elif leaf.type in closers:
            want = closers[leaf.type]
            if local and local[-1] == want:
                local.pop()
            elif pending and pending[-1] == want:
                pending.pop()
                closed += 1
            if not pending:
                break
    return stack, closed


def _enclosing(node: Node | None, types: frozenset[str]) -> Node | None:
    while node is not None and node.type not in types:
        node = node.parent
    return node


def _string_quote(spec: ShapeSpec, root: Node, cursor: int, line_end: int) -> tuple[bool, str]:
    """(inside a string, its closing delimiter when it closes on the cursor's line)."""
    if not spec.strings:
        return False, ""
    node = _enclosing(root.descendant_for_byte_range(cursor, cursor), spec.strings)
    if node is None or not (node.start_byte < cursor < node.end_byte):
        return False, ""
    last = node.children[-1] if node.child_count else None
    if last is None or last.is_missing or last.start_byte < cursor or last.start_byte > line_end:
        return True, ""
    return True, (last.text or b"").decode("utf-8", "replace")


def _next_child(leaf: Node) -> Node | None:
    """The node right after ``leaf`` under the same parent (``next_sibling`` skips an empty body)."""
    parent = leaf.parent
    if parent is None:
        return None
    children = parent.children
    for i, child in enumerate(children):
        if child.start_byte == leaf.start_byte and child.type == leaf.type:
            return children[i + 1] if i + 1 < len(children) else None
    return None


def _opens_block(spec: ShapeSpec, leaf: Node, line: str, bracketed: bool) -> bool:
    """Whether ``leaf`` (a block opener token) ends a block header.

    ``bracketed``: the token sits inside a bracket opened on its own line (``def f(x:`` is a parameter's
    annotation, not a header, however broken the code around it is).
    """
    if leaf.type not in spec.block_openers:
        return False
    parent = leaf.parent
    if not spec.blocks or (parent is not None and parent.type in spec.blocks):
        return True
    after = _next_child(leaf)
    if after is not None and after.type in spec.blocks:
        return True
    words = line.split(None, 1)
    return (
        not bracketed
        and parent is not None
        and parent.type == "ERROR"
        and bool(words)
        and words[0] in spec.header_keywords
    )


def analyze(prefix: str, suffix: str, language: str | None, multiline: bool | None = None) -> CursorSyntax:
    """Decide the suggestion's shape at the cursor (unless ``multiline`` forces it) and gather the
    bracket and quote facts the stop rules balance against the suffix."""
    started = time.perf_counter()
    syntax = _analyze(prefix, suffix, language)
    if multiline is not None:
        syntax = _replace(syntax, multiline=multiline, reason="always" if multiline else "never")
    return _replace(syntax, parse_ms=round((time.perf_counter() - started) * 1000, 3))


def _replace(syntax: CursorSyntax, **changes: Any) -> CursorSyntax:
    from dataclasses import replace

    return replace(syntax, **changes)


def _analyze(prefix: str, suffix: str, language: str | None) -> CursorSyntax:
    if language is None:
        multi, reason = text_heuristic(prefix, suffix)
        return CursorSyntax(multi, reason)
    from fimble.indexer.parse import parser

    try:
        ts_parser = parser(language)
    except ValueError:
        multi, reason = text_heuristic(prefix, suffix)
        return CursorSyntax(multi, reason)
    spec = shape_spec(language)
    head, tail = _window(prefix, suffix)
    head_bytes = head.encode("utf-8", "surrogatepass")
    cursor = len(head_bytes)
    source = head_bytes + tail.encode("utf-8", "surrogatepass")
    root = ts_parser.parse(source).root_node
    leaves = _leaves(root)
    before = [leaf for leaf in leaves if leaf.end_byte <= cursor]
    after = [leaf for leaf in leaves if leaf.start_byte >= cursor]
    stack, closed = _brackets(spec, before, after)
    line_end = source.find(b"\n", cursor)
    line_end = len(source) if line_end < 0 else line_end
    in_string, quote = _string_quote(spec, root, cursor, line_end)
    facts = CursorSyntax(
        False,
        "",
        open_brackets="".join(leaf.type for leaf in stack),
        closed_in_suffix=closed,
        string_quote=quote,
        language=language,
    )
    line_prefix = prefix[prefix.rfind("\n") + 1 :]
    line_suffix = _first_line(suffix)
    last = before[-1] if before else None
    line_start = cursor - len(line_prefix.encode("utf-8", "surrogatepass"))
    bracketed = bool(stack) and stack[-1].start_byte >= line_start and stack[-1] is not last
    if in_string:
        return _replace(facts, multiline=False, reason="inside a string", prose=True)
    inside = [leaf for leaf in leaves if leaf.start_byte < cursor < leaf.end_byte]
    if (inside and inside[0].type in spec.comments) or (
        last is not None
        and last.type in spec.comments
        and last.end_byte == cursor
        and b"\n" not in (last.text or b"")
    ):
        return _replace(facts, multiline=False, reason="inside a comment", prose=True)
    header_indent = None
    if last is not None and (last.type in spec.brackets or last.type in spec.block_openers):
        row = last.start_point.row
        header_line = head.split("\n")[row] if row < head.count("\n") + 1 else ""
        header_indent = _indent(header_line) + 1
        facts = _replace(facts, block_indent=header_indent)
    if line_suffix.strip():
        first = after[0] if after else None
        if (
            last is not None
            and first is not None
            and spec.brackets.get(last.type) == first.type
            and _opens_block(spec, last, line_prefix.strip(), bracketed)
            and not line_suffix.strip().strip("".join(spec.closers) + ";,").strip()
        ):
            return _replace(facts, multiline=True, reason="empty block")
        return _replace(facts, multiline=False, reason="text after the cursor")
    if not line_prefix.strip():
        return _blank_line(line_prefix, suffix, last, spec, facts)
    if last is not None and _opens_block(spec, last, line_prefix.strip(), bracketed):
        return _replace(facts, multiline=True, reason="block header")
    if last is not None and last.type in spec.brackets:
        return _replace(facts, multiline=True, reason="open bracket")
    return _replace(facts, multiline=False, reason="end of a line")


def _blank_line(
    line_prefix: str, suffix: str, last: Node | None, spec: ShapeSpec, facts: CursorSyntax
) -> CursorSyntax:
    """An empty line: a block when nothing of the cursor's block follows (an empty body, the end of a
    block or of the file), one line between two statements of the same block."""
    following = _next_code_line(suffix)
    opened = last is not None and (last.type in spec.brackets or last.type in spec.block_openers)
    if following is None:
        return _replace(facts, multiline=True, reason="empty body" if opened else "end of file")
    if following.lstrip()[:1] in spec.closers or _indent(following) < len(line_prefix):
        return _replace(facts, multiline=True, reason="empty body" if opened else "end of a block")
    if opened and facts.block_indent is not None and _indent(following) < facts.block_indent:
        return _replace(facts, multiline=True, reason="empty body")
    return _replace(facts, multiline=False, reason="between statements")


def _first_line(text: str) -> str:
    end = text.find("\n")
    return text if end < 0 else text[:end]


def _next_code_line(suffix: str) -> str | None:
    """The first non-blank line after the cursor's line, found without splitting the whole file."""
    start = suffix.find("\n") + 1
    while 0 < start <= len(suffix):
        end = suffix.find("\n", start)
        line = suffix[start : end if end >= 0 else len(suffix)]
        if line.strip():
            return line
        if end < 0:
            return None
        start = end + 1
    return None


def stop_context(prefix: str, suffix: str, syntax: CursorSyntax) -> StopContext:
    """The stop rules' view of one request: the cursor's line, the suffix and the syntax facts."""
    start = prefix.rfind("\n") + 1
    return StopContext(
        line_prefix=prefix[start:],
        suffix=suffix,
        multiline=syntax.multiline,
        open_brackets=syntax.open_brackets if syntax.language is not None else None,
        closed_in_suffix=syntax.closed_in_suffix,
        string_quote=syntax.string_quote,
        block_indent=syntax.block_indent,
        above=_lines_above(prefix, start),
        prose=syntax.prose,
    )


_ABOVE_CHARS = 4000


def _lines_above(prefix: str, start: int) -> str:
    """The whole lines before the cursor's line within ``_ABOVE_CHARS`` (not a copy of a huge prefix)."""
    low = max(0, start - _ABOVE_CHARS)
    if low > 0:
        low = prefix.find("\n", low - 1, start) + 1 or start
    return prefix[low:start]
