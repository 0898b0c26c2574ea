"""Which masked lines use another workspace file's symbols: the lines repository context is for.

A name counts only when it *resolves* to another file, not when something of that name happens to be
defined somewhere: ``jsonify(result=a + b)`` uses ``jsonify`` (imported from the package) but not
``result`` (a keyword argument that a test elsewhere also defines). The rules, over one line's code
(strings, comments, keyword-argument and assignment targets, and names being defined are skipped):

* a bare name is cross-file when this file binds it by an import that resolves to a workspace file
  (``from .app import Flask`` -> ``Flask``) and does not define it itself;
* an attribute (``obj.name``, ``module.name``) is cross-file when ``name`` is defined in a workspace
  file reachable through this file's imports (a few hops: a package's ``__init__`` re-exports, a
  class's bases) and not in this file, is not a method of a builtin type (``d.get``, ``f.close``)
  and is not taken from a module outside the workspace (``click.group``).

Which characters start comments and strings, and which names and methods are the language's own,
are per-language data (``data/crossfile.toml``): Python and the JavaScript family (JavaScript,
TypeScript, TSX, where ``#`` starts a private field, not a comment). Pure functions over strings and
small lookups, so they are tested without an index.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fimble.completion.context.unbound import PYTHON_BUILTINS

__all__ = ["Resolver", "Use", "classify", "code_uses", "language_facts", "not_named_above"]

# ``x.get``, ``x.pop``, ``x.close``: the methods of builtin types and files are called on dicts, lists
# and streams far more often than on the workspace's class that happens to define one too.
_BUILTIN_ATTRS = frozenset(
    name
    for kind in (dict, list, str, bytes, set, tuple, int, object, type(open), type(iter([])))
    for name in dir(kind)
) | {"close", "read", "write", "readline", "flush", "seek"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINING = ("def", "class", "function", "fn", "func", "struct", "interface", "type", "enum", "trait")


@dataclass(frozen=True)
class LanguageFacts:
    """What finding a line's names needs to know about its language (``data/crossfile.toml``)."""

    line_comments: tuple[str, ...]
    block_comment: tuple[str, str] | None
    quotes: str
    builtins: frozenset[str]
    builtin_attrs: frozenset[str]


@cache
def _families() -> dict[str, LanguageFacts]:
    raw = tomllib.loads(resources.files("fimble.evaluation.data").joinpath("crossfile.toml").read_text())
    out: dict[str, LanguageFacts] = {}
    for family in raw.values():
        block = family.get("block_comment")
        facts = LanguageFacts(
            line_comments=tuple(family.get("line_comments", ())),
            block_comment=(block[0], block[1]) if block else None,
            quotes=family.get("quotes", "\"'"),
            builtins=frozenset(family.get("builtins", ())),
            builtin_attrs=frozenset(family.get("builtin_attrs", ())),
        )
        out.update(dict.fromkeys(family["languages"], facts))
    return out


@cache
def language_facts(language: str = "python") -> LanguageFacts:
    """The facts of ``language`` (an indexer language name); Python's for a language without any,
    with the interpreter's builtins and built-in types' methods for Python itself."""
    families = _families()
    facts = families.get(language, families["python"])
    if facts is families["python"]:
        facts = LanguageFacts(
            facts.line_comments,
            facts.block_comment,
            facts.quotes,
            facts.builtins | PYTHON_BUILTINS,
            facts.builtin_attrs | _BUILTIN_ATTRS,
        )
    return facts


@dataclass(frozen=True)
class Use:
    """A name the code of a line uses; ``qualifier`` is the name before the dot of ``a.name``."""

    name: str
    qualifier: str | None = None


def _code_mask(line: str, facts: LanguageFacts | None = None) -> list[bool]:
    """Per character, whether it is code (not inside a string literal or a comment)."""
    facts = facts or language_facts()
    out = [True] * len(line)
    quote: str | None = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote is not None:
            out[i] = False
            if ch == "\\":
                if i + 1 < len(line):
                    out[i + 1] = False
                i += 2
                continue
            if line.startswith(quote, i):
                for k in range(len(quote)):
                    out[i + k] = False
                i += len(quote)
                quote = None
                continue
            i += 1
            continue
        if any(line.startswith(marker, i) for marker in facts.line_comments):
            for k in range(i, len(line)):
                out[k] = False
            break
        if facts.block_comment and line.startswith(facts.block_comment[0], i):
            end = line.find(facts.block_comment[1], i + len(facts.block_comment[0]))
            stop = len(line) if end < 0 else end + len(facts.block_comment[1])
            for k in range(i, stop):
                out[k] = False
            i = stop
            continue
        if ch in facts.quotes:
            quote = line[i : i + 3] if line.startswith(ch * 3, i) else ch
            for k in range(len(quote)):
                out[i + k] = False
            i += len(quote)
            continue
        i += 1
    return out


def code_uses(line: str, column: int = 0, language: str = "python") -> list[Use]:
    """Names used by the code of ``line`` from ``column`` on (the masked rest), in order, each once.

    Skipped: names in strings and comments, ``name=`` (a keyword argument or an assignment target,
    not a use), the name after ``def``/``class`` (being defined), builtins, keywords and names
    shorter than three characters.
    """
    facts = language_facts(language)
    code = _code_mask(line, facts)
    out: dict[Use, None] = {}
    for m in _IDENT.finditer(line):
        start, end = m.span()
        if start < column or not code[start]:
            continue
        name = m.group()
        if len(name) < 3 or name in facts.builtins:
            continue
        rest = line[end:].lstrip()
        if rest.startswith("=") and not rest.startswith("=="):
            continue
        before = line[:start].rstrip()
        if before.split()[-1:] and before.split()[-1] in _DEFINING:
            continue
        qualifier = None
        if before.endswith(".") and before[:-1].rstrip():
            q = _IDENT.findall(before[:-1].rstrip()[-60:])
            tail = before[:-1].rstrip()
            qualifier = q[-1] if q and tail.endswith(q[-1]) else "?"
        out.setdefault(Use(name, qualifier), None)
    return list(out)


@dataclass(frozen=True)
class Resolver:
    """What one file's imports make reachable.

    ``bound``: names this file binds by imports that resolve to workspace files (from-imports), to
    those files. ``own``: names defined in this file. ``reachable(name)``: whether ``name`` is defined
    in a workspace file reachable through the imports (other than this one). ``external``: names
    bound by imports from outside the workspace (``click`` in ``click.group``: not ours, whatever
    the workspace defines under that attribute name).
    """

    bound: Mapping[str, tuple[str, ...]]
    own: frozenset[str]
    reachable: Callable[[str], bool]
    external: frozenset[str] = frozenset()
    language: str = "python"

    def is_cross_file(self, use: Use) -> bool:
        if use.name in self.own:
            return False
        if use.qualifier is None:
            return bool(self.bound.get(use.name))
        if use.qualifier in self.external and use.qualifier not in self.bound:
            return False
        if use.name in language_facts(self.language).builtin_attrs:
            return False
        return self.reachable(use.name)


def classify(uses: Iterable[Use], resolver: Resolver) -> list[str]:
    """The names among ``uses`` that resolve to another workspace file, in order, each once."""
    return list(dict.fromkeys(u.name for u in uses if resolver.is_cross_file(u)))


def not_named_above(names: Iterable[str], above: str) -> list[str]:
    """The ``names`` that the text above the cursor never spells out (as a whole word).

    A cross-file line whose names all appear above the cursor can be completed by copying from the
    file itself, so repository context has little to add there; the lines that use a name the file
    has not shown yet are the ones only context can help with (CrossCodeEval keeps only those)."""
    return [n for n in names if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", above)]
