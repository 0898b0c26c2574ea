"""The imports a JavaScript or TypeScript file lacks: ``import { a } from './m';`` lines that can work.

The Python side (``unbound``, ``imports``) reads ``from M import a``. An ES module lists the names
first and names the module by a path relative to the importing file, which the 1.5B model has to
work out from a definition shown under its own path, and often cannot: in the served eval of issue
20, rxjs's masked import lines (``import { operate } from '../util/lift';``) got no context at all and
the model wrote imports of names the file already had. These helpers find the import rows of a
buffer, the names its import statements bind, the names its code uses that nothing binds (what the
import being written is for), and, through the index, the statements that would bind them, in the
file's own style (quotes, semicolons, spaces inside the braces). ``fimble.completion.engine.guide``
keeps the generated line to one of those statements, letting the model choose which.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

from fimble.completion.context.imports import ImportChoices
from fimble.completion.context.unbound import statement_rows
from fimble.indexer.languages import detect_language

__all__ = [
    "barrel_choices",
    "code_only",
    "import_choices",
    "import_rows",
    "imported_names",
    "is_js",
    "reexport_candidates",
    "reexported_names",
    "unbound_names",
]

log = logging.getLogger(__name__)

_LANGUAGES = frozenset({"javascript", "typescript", "tsx"})
# A module specifier drops these; ``.d.ts`` is a declaration file of the same module name.
_DROP = (".d.ts", ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")

_WORDS = (
    "abstract any as async await boolean break case catch class const constructor continue debugger "
    "declare default delete do else enum export extends false finally for from function get if "
    "implements import in infer instanceof interface is keyof let module namespace never new null "
    "number object of package private protected public readonly require return satisfies set static "
    "string super switch symbol this throw true try type typeof undefined unique unknown var void "
    "while with yield arguments"
)
# Globals of the language and its standard library: never a workspace definition when written bare.
_GLOBALS = (
    "Array ArrayBuffer ArrayLike AsyncIterable AsyncIterableIterator AsyncIterator Boolean DataView "
    "Date Error EvalError Exclude Extract Function Infinity InstanceType Iterable IterableIterator "
    "Iterator JSON Map Math NaN NonNullable Number Object Omit Parameters Partial Pick Promise "
    "PromiseLike Proxy RangeError Readonly ReadonlyArray Record Reflect RegExp Required ReturnType "
    "Set String Symbol SyntaxError TypeError URIError WeakMap WeakRef WeakSet clearInterval "
    "clearTimeout console document globalThis isFinite isNaN parseFloat parseInt process "
    "queueMicrotask setInterval setTimeout window"
)
BUILTINS = frozenset(_WORDS.split()) | frozenset(_GLOBALS.split())

_IDENT = r"[A-Za-z_$][\w$]*"
_STRINGS = re.compile(r"/\*[\s\S]*?\*/|//[^\n]*|`(?:\\.|[^`\\])*`|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'")
_DECLARED = re.compile(
    rf"\b(?:const|let|var|function\*?|class|interface|type|enum|namespace)\s+({_IDENT})|\bcatch\s*\(\s*({_IDENT})"
)
_DESTRUCTURED = re.compile(r"\b(?:const|let|var)\s*[{\[]([^}\]=]*)[}\]]\s*=")
# Parameter lists: ``(a, b: T = x) =>``, ``function f(a) {``, ``method(a): T {`` (nested brackets one
# level deep), and a lone arrow parameter ``a =>``.
# A lookahead, so that lists inside another list's match (``operate((a, b) => {``) are found too.
_PARAMS = re.compile(r"(?=\(((?:[^()]|\([^()]*\))*)\)\s*(?::\s*[^;{}=]*?)?\s*(?:=>|\{))")
_MODIFIERS = r"(?:(?:readonly|public|private|protected)\s+)*"
_PARAM = re.compile(rf"(?:^|[,(])\s*{_MODIFIERS}(?:\.\.\.)?({_IDENT})\s*(?=[?:=,)])")
_ARROW_PARAM = re.compile(rf"({_IDENT})\s*=>")
# A use: not after a dot, not an object key or annotated parameter (``key:``; ``a ? b : c`` aside).
_USE = re.compile(r"(?<![.\w$])([A-Za-z_$][\w$]{2,})\b(?!\s*\??:(?!:))")
_BRACED = re.compile(r"\{([^}]*)\}")
_DEFAULT = re.compile(rf"^\s*import\s+(?:type\s+)?({_IDENT})\s*(?:,|\s+from\b)")
_NAMESPACE = re.compile(rf"\*\s*as\s+({_IDENT})")
_SPEC = re.compile(r"""\bfrom\s*(['"])([^'"]+)\1(;?)""")
_REEXPORT = re.compile(
    r"""^\s*export\s+(?:type\s+)?(?:\{([^}]*)\}|\*(?:\s+as\s+[\w$]+)?)\s*from\s*(['"])([^'"]+)\2""", re.M
)
_STATEMENT_START = re.compile(r"(?=^\s*(?:import|export)\b)", re.M)  # where each statement begins
# A barrel: at least this many re-exports, and more of them than imports.
_BARREL_MIN = 3
_BARREL_DIRS = 16  # folders a barrel draws from that are searched for modules it does not re-export yet
_BARREL_FILES = 160  # modules offered at most
_BARREL_NAMES = 6  # names per module at most (the exported ones first)
_SIBLING_DIRS = 8  # folders of import choices whose other modules are listed (``ImportChoices.siblings``)
_SIBLING_SPECS = 400


def is_js(path: str) -> bool:
    """A JavaScript or TypeScript file, by the indexer's language table."""
    return detect_language(path) in _LANGUAGES


def _starts_import(text: str) -> bool:
    """``import ...`` (not an ``import(...)`` expression) or an ``export ... from`` re-export."""
    return bool(re.match(r"import\b(?!\s*\()", text) or (re.match(r"export\b", text) and " from " in text))


def import_rows(lines: Sequence[str]) -> set[int]:
    """Rows of ``import`` statements (a name list over several lines included) and of
    ``export ... from`` re-exports."""
    return statement_rows(lines, _starts_import, "{}")


def imported_names(lines: Sequence[str], rows: set[int]) -> set[str]:
    """Names the import statements on ``rows`` bind (``a as b`` binds ``b``; a default import and
    ``* as ns`` bind theirs), read from the buffer: newer than the index's copy of the file."""
    text = "\n".join(lines[r] for r in sorted(rows) if r < len(lines))
    out: set[str] = set()
    for statement in _STATEMENT_START.split(text):
        if not statement.strip().startswith("import"):
            continue  # a re-export binds nothing here
        if m := _DEFAULT.match(statement):
            out.add(m.group(1))
        out.update(_NAMESPACE.findall(statement))
        for braced in _BRACED.findall(statement):
            for item in braced.split(","):
                words = item.split()
                if words and words[0] == "type":
                    words = words[1:]
                if len(words) == 3 and words[1] == "as":
                    out.add(words[2])
                elif len(words) == 1:
                    out.add(words[0])
    return out


def being_written(
    lines: Sequence[str], rows: set[int], line: int, exists: Callable[[str], bool] | None = None
) -> set[int]:
    """The rows of the import statement the cursor's ``line`` is in, when its module is not
    written yet (``import { observeNotification } from '..``, or ``'..'`` with the quote the editor
    closed, a relative module that ``exists`` says names no file): its names are what the line
    imports, not names the file binds already. Counted as bound, they left nothing unbound, so the
    line had no choices and the model guessed the module (rxjs:
    ``'../observable/observeNotification'`` for ``'../Notification'``, ``'../utils'`` for
    ``'../util/argsOrArgArray'``)."""
    if line not in rows or line >= len(lines):
        return set()
    start = line
    while start - 1 in rows and not _starts_import(lines[start].strip()):
        start -= 1
    statement = "\n".join(lines[start : line + 1])
    if not statement.lstrip().startswith("import"):
        return set()
    m = _SPEC.search(statement)
    spec = m.group(2) if m is not None else None
    if spec is not None and not (exists is not None and spec.startswith(".") and not exists(spec)):
        return set()
    return set(range(start, line + 1))


def module_exists(index: Any, importer: str, spec: str) -> bool:
    """Whether the relative ``spec`` names a workspace module from ``importer``, by the index's own
    import resolution; True when the index cannot tell."""
    try:
        return bool(index.resolve_spec(importer, spec))
    except Exception:
        return True


def code_only(text: str) -> str:
    """``text`` with strings, template literals and comments blanked, line for line."""
    return _STRINGS.sub(lambda m: '""' + "\n" * m.group(0).count("\n"), text)


def unbound_names(body: str, bound: set[str], limit: int = 12) -> list[str]:
    """Names the file's code uses that nothing in it binds (no import, declaration, parameter,
    destructured or caught name), most frequent first: what an import being written is most likely
    for. Attributes (``x.name``) and object keys do not count. Textual, so it over-reports a little
    (a name bound in a shape it does not read); the index lookup after it drops what the workspace
    does not define."""
    body = code_only(body)
    here = {next(g for g in m.groups() if g) for m in _DECLARED.finditer(body)}
    for m in _DESTRUCTURED.finditer(body):
        here.update(re.findall(rf"({_IDENT})\s*(?:[,=]|$)", m.group(1).strip()))
    for m in _PARAMS.finditer(body):
        here.update(_PARAM.findall("(" + re.sub(r"<[^<>]*>", "", m.group(1)) + ")"))
    here.update(_ARROW_PARAM.findall(body))
    counts: dict[str, int] = {}
    for m in _USE.finditer(body):
        name = m.group(1)
        if name not in bound and name not in here and name not in BUILTINS:
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda n: -counts[n])[:limit]


def _style(lines: Sequence[str], rows: set[int]) -> tuple[str, bool, bool]:
    """(quote, semicolon, spaces inside braces) of the file's own import statements; rxjs's and
    Prettier's defaults when it has none."""
    quotes = {"'": 0, '"': 0}
    semi = spaced = tight = 0
    for row in rows:
        text = lines[row]
        if m := _SPEC.search(text):
            quotes[m.group(1)] += 1
            semi += 1 if m.group(3) else -1
        spaced += len(re.findall(r"\{\s\S|\S\s\}", text))
        tight += len(re.findall(r"\{[^\s}]|[^\s{]\}", text))
    quote = "'" if quotes["'"] >= quotes['"'] else '"'
    return quote, semi >= 0, spaced >= tight


def module_spec(importer: str, target: str) -> str | None:
    """How ``importer`` names the workspace file ``target`` after ``from``: a relative specifier
    without the extension (``../util/lift``), a directory for an ``index`` file."""
    if not target.endswith(_DROP):
        return None
    stem = next(target[: -len(s)] for s in _DROP if target.endswith(s))
    if posixpath.basename(stem) == "index":
        stem = posixpath.dirname(stem) or "."
    rel = posixpath.relpath(stem, posixpath.dirname(importer) or ".")
    return rel if rel == "." or rel.startswith("..") else f"./{rel}"


def import_choices(
    index: Any, importer: str, lines: Sequence[str], unbound: Sequence[str], line: int | None = None
) -> ImportChoices:
    """``import { a, b } from '<spec>';`` for each workspace file that defines one of the
    ``unbound`` names at top level (up to eight files per name), in the file's style, with the
    modules beside them and the names the import rows other than the cursor's ``line`` bind
    already. A name the workspace does not define gives no choice. Index failures mean no choices."""
    if not is_js(importer):
        return ImportChoices()
    modules: dict[str, list[str]] = {}
    folders: list[str] = []  # of the relative choices' files: their siblings are listed too
    for name in unbound[:24]:
        try:
            found = index.definitions(name, limit=8)
        except Exception:
            log.debug("definitions(%s) failed", name, exc_info=True)
            continue
        for d in found:
            if d.path == importer or getattr(d, "scope", "") or not is_js(d.path):
                continue
            spec = module_spec(importer, d.path)
            if spec is None:
                continue
            names = modules.setdefault(spec, [])
            if name not in names:
                names.append(name)
            folder = posixpath.dirname(d.path)
            if spec.startswith(".") and folder not in folders:
                folders.append(folder)
    rows = import_rows(lines)
    quote, semi, spaced = _style(lines, rows)
    return ImportChoices(
        {m: tuple(ns) for m, ns in modules.items()},
        language="js",
        quote=quote,
        semicolon=semi,
        spaced=spaced,
        siblings=_siblings(index, importer, folders[:_SIBLING_DIRS]) if modules else (),
        bound=tuple(sorted(imported_names(lines, rows - {line}))) if modules else (),
    )


def _siblings(index: Any, importer: str, folders: Sequence[str]) -> tuple[str, ...]:
    """What ``importer`` can name in ``folders``: each folder's specifier with a ``/`` (it is
    listed whole), then the specifiers of its JS/TS files and of its subfolders (directory
    imports). Nothing when they are too many to carry (the guide then holds no path)."""
    out: list[str] = []
    here = posixpath.dirname(importer) or "."
    for folder in folders:
        try:
            files = index.files_in(folder)
            subfolders = index.folders_in(folder)
        except Exception:
            log.debug("listing %s failed", folder, exc_info=True)
            continue
        rel = posixpath.relpath(folder or ".", here)
        out.append((rel if rel == "." or rel.startswith("..") else f"./{rel}") + "/")
        for path in files:
            spec = module_spec(importer, path) if path != importer and is_js(path) else None
            if spec is not None:
                out.append(spec)
        out += [s for sub in subfolders if (s := module_spec(importer, f"{sub}/index.ts"))]
    return tuple(dict.fromkeys(out)) if len(out) <= _SIBLING_SPECS else ()


def _between(lines: Sequence[str], rows: set[int], line: int) -> tuple[str, str] | None:
    """The first names re-exported on the nearest rows above and below ``line`` when they are in
    order (case aside): a sorted barrel's next row names something between them."""

    def first_name(step: int) -> str | None:
        row = line + step
        while 0 <= row < len(lines) and (row in rows or not lines[row].strip()):
            if m := _REEXPORT.match(lines[row]):
                words = (m.group(1) or "").replace(",", " ").split()
                return words[0] if words else None
            row += step
        return None

    above, below = first_name(-1), first_name(1)
    if above and below and above.lower() < below.lower():
        return above.lower(), below.lower()
    return None


def reexport_candidates(
    index: Any, barrel: str, lines: Sequence[str], line: int | None = None, beside: Collection[str] = ()
) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The modules a barrel file (``index.ts``: mostly ``export ... from`` rows) does not
    re-export yet, from the folders it already re-exports from: specifier -> (workspace path, its
    top-level names, exported first). Not a barrel: none. When the rows around the cursor's
    ``line`` are sorted by name, only names that sort between them count (when there are some),
    and the ``beside`` names (what another barrel written alike re-exports at that spot).

    The line being written in a barrel is most often the next module's re-export (rxjs's
    ``export { pairs } from './internal/observable/pairs';``): the 1.5B model, which cannot know
    that module exists, otherwise writes a row that is already there."""
    if not is_js(barrel):
        return {}
    rows = import_rows(lines)
    text = "\n".join(lines[r] for r in sorted(rows) if r < len(lines))
    found = list(_REEXPORT.finditer(text))
    if len(found) < _BARREL_MIN or 2 * len(found) <= len(_STATEMENT_START.findall(text)):
        return {}
    exported = reexported_names(lines, rows)
    specs: set[str] = set()
    folders: dict[str, int] = {}
    here = posixpath.dirname(barrel)
    for m in found:
        specs.add(m.group(3))
        if m.group(3).startswith("."):
            folder = posixpath.dirname(posixpath.normpath(posixpath.join(here, m.group(3))))
            folder = "" if folder == "." else folder
            folders[folder] = folders.get(folder, 0) + 1
    modules: dict[str, tuple[str, tuple[str, ...]]] = {}
    for folder in sorted(folders, key=lambda f: -folders[f])[:_BARREL_DIRS]:
        try:
            files = index.files_in(folder)
        except Exception:
            log.debug("files_in(%s) failed", folder, exc_info=True)
            continue
        for path in files:
            spec = module_spec(barrel, path) if path != barrel and is_js(path) else None
            if spec is None or spec in specs or spec in modules or len(modules) >= _BARREL_FILES:
                continue
            try:
                defs = [d for d in index.file_outline(path) if not d.scope and d.name not in exported]
            except Exception:
                log.debug("file_outline(%s) failed", path, exc_info=True)
                continue
            ranked = sorted(defs, key=lambda d: not d.signature.startswith("export"))
            names = tuple(dict.fromkeys(d.name for d in ranked))[:_BARREL_NAMES]
            if names:
                modules[spec] = (path, names)
    span = _between(lines, rows, line) if line is not None else None
    if span is not None:
        lo, hi = span
        keep = {n.lower() for n in beside}
        inside = {
            m: (p, tuple(n for n in ns if lo < n.lower() < hi or n.lower() in keep))
            for m, (p, ns) in modules.items()
        }
        modules = {m: found for m, found in inside.items() if found[1]} or modules
    return modules


def reexported_names(lines: Sequence[str], rows: set[int]) -> set[str]:
    """Names the ``export { a, b as c } from`` statements on ``rows`` re-export (``a``, ``c``)."""
    text = "\n".join(lines[r] for r in sorted(rows) if r < len(lines))
    out: set[str] = set()
    for m in _REEXPORT.finditer(text):
        for item in (m.group(1) or "").split(","):
            words = item.split()
            if words:
                out.add(words[-1])
    return out


def barrel_choices(
    candidates: dict[str, tuple[str, tuple[str, ...]]],
    lines: Sequence[str],
    index: Any = None,
    barrel: str = "",
    line: int | None = None,
) -> ImportChoices:
    """``export { a } from './m';`` for each of ``reexport_candidates``, in the file's style, with
    the modules beside them (given the ``index``) and the names the rows other than the cursor's
    ``line`` re-export already (a second export of one is an error)."""
    rows = import_rows(lines)
    quote, semi, spaced = _style(lines, rows)
    modules = {spec: names for spec, (_, names) in candidates.items()}
    folders = list(dict.fromkeys(posixpath.dirname(path) for path, _ in candidates.values()))
    return ImportChoices(
        modules,
        language="js",
        quote=quote,
        semicolon=semi,
        spaced=spaced,
        keyword="export",
        siblings=_siblings(index, barrel, folders[:_SIBLING_DIRS]) if index is not None else (),
        bound=tuple(sorted(reexported_names(lines, rows - {line}))),
    )
