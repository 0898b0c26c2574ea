"""The import statements a Python file lacks: what an import line at the cursor can say.

Among the imports, the line being written is almost always for a name the code below already uses
and nothing binds yet: a user who wrote the code first goes back up to import it, and the eval masks
exactly such lines. Shown those names' definitions, the 1.5B model still writes imports that cannot
work (``from jinja2.bccache import CodeGenerator``: bccache defines no such name; jinja2's import
lines were 2 right of 22 with context). This module works out the statements that would bind a
missing name, in every form the file could write them: relative within its package, absolute, or
from a package that re-exports the name, a standard-library module, or a workspace module imported
whole. ``fimble.completion.engine.guide`` then keeps the generated line to one of them, letting the model
choose which.

A missing name that nothing defines may be a defined one under a prefix: requests' models.py calls
``RequestsSSLError`` and imports ``from .exceptions import SSLError as RequestsSSLError``. Such a
name's choice is that statement, alias included: the model cannot know the alias (its use is
hundreds of lines below), so the guide holds the line to it.

The choices travel from the gatherer to the engine's thread as one extra context snippet
(``IMPORT_CHOICES``), so every front door passes them on without knowing about them;
``split_choices`` takes it out again before the prompt is built. Index failures mean no choices.
"""

from __future__ import annotations

import importlib
import logging
import posixpath
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

__all__ = ["IMPORT_CHOICES", "ImportChoices", "import_choices", "open_list", "split_choices"]

log = logging.getLogger(__name__)

# The reason of the snippet that carries the choices (its text: one statement per module).
IMPORT_CHOICES = "imports this file lacks (keeps the import line to one of them)"

# Standard-library modules whose public names are imported by name (``from typing import Any``).
_STDLIB_FROM = (
    "typing",
    "collections",
    "collections.abc",
    "dataclasses",
    "pathlib",
    "functools",
    "itertools",
    "enum",
    "abc",
    "contextlib",
    "datetime",
    "decimal",
    "fractions",
    "types",
    "io",
    "os",
    "os.path",
    "shutil",
    "subprocess",
    "threading",
    "concurrent.futures",
    "asyncio",
    "urllib.parse",
    "copy",
    "textwrap",
    "operator",
    "inspect",
    "traceback",
    "warnings",
    "uuid",
)
_STATEMENT = re.compile(r"^(?:from\s+(\S+)\s+import\s+(.+)|import\s+(\S+))$")
_JS_STATEMENT = re.compile(r"""^(import|export) \{( ?)([^}]*?) ?\} from (['"])([^'"]+)['"](;?)$""")
# The line of a JS choices' text that lists ``siblings`` (specifiers hold no spaces in practice).
_SIBLINGS = "// modules beside them: "
_BOUND = "// names bound already: "  # and the one that lists ``bound``
# Where a missing name may be another under a prefix: a capital after a small letter or a digit
# (``Requests|SSLError``, ``Compat|JSONDecodeError``), or after underscores (``_|SSLError``).
_ALIAS_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=_)(?=[A-Za-z])")
# An import list still open before the cursor's line: ``from M import (`` with no ``)`` after it.
_OPEN_LIST = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]*\(([^)]*)\Z", re.M)


def open_list(above: str) -> str | None:
    """M, when ``above`` (the text before the cursor's line) ends inside a ``from M import (``
    list: the line is then the next names of M."""
    found = _OPEN_LIST.search(above[-4000:])
    return found.group(1) if found else None


@dataclass(frozen=True)
class ImportChoices:
    """``from M import a, b`` for each module M and the missing names it can give; ``import X``
    for each X in ``plain``. With ``language`` "js": ``import { a, b } from 'M';`` instead,
    written with the file's ``quote``, ``semicolon`` and ``spaced`` braces
    (``fimble.completion.context.js_imports``); with ``keyword`` "export", a barrel file's
    re-exports: ``export { a } from 'M';``. ``siblings``: the specifiers of every workspace module in
    the folders of the relative ones among ``modules``, so that the guide can tell a module path that
    names no file (a compile error) from one it simply was not offered; ``bound``: the names the
    file's other import statements bind (a barrel's: re-export), which the line must not again."""

    modules: dict[str, tuple[str, ...]] = field(default_factory=dict)
    plain: tuple[str, ...] = ()
    language: str = "python"
    quote: str = "'"
    semicolon: bool = True
    spaced: bool = True
    keyword: str = "import"
    siblings: tuple[str, ...] = ()
    bound: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.modules or self.plain)

    def js_head(self, type_only: bool = False) -> str:
        opening = f"{self.keyword} type {{" if type_only else f"{self.keyword} {{"
        return opening + (" " if self.spaced else "")

    def js_tail(self, module: str) -> str:
        """What follows the names: `` } from './m';``."""
        space, end = (" " if self.spaced else ""), (";" if self.semicolon else "")
        return f"{space}}} from {self.quote}{module}{self.quote}{end}"

    def as_text(self) -> str:
        if self.language == "js":
            rows = [self.js_head() + ", ".join(ns) + self.js_tail(m) for m, ns in self.modules.items()]
            if self.siblings:
                rows.append(_SIBLINGS + " ".join(self.siblings))
            if self.bound:
                rows.append(_BOUND + " ".join(self.bound))
            return "\n".join(rows)
        lines = [f"from {m} import {', '.join(names)}" for m, names in self.modules.items()]
        return "\n".join(lines + [f"import {x}" for x in self.plain])

    @classmethod
    def from_text(cls, text: str) -> ImportChoices:
        modules: dict[str, tuple[str, ...]] = {}
        plain: list[str] = []
        js = [m for line in text.splitlines() if (m := _JS_STATEMENT.match(line.strip()))]
        if js:
            for m in js:
                modules[m.group(5)] = tuple(n.strip() for n in m.group(3).split(",") if n.strip())
            first = js[0]
            quote, semicolon, spaced = first.group(4), bool(first.group(6)), bool(first.group(2))
            extra = {
                head: line[len(head) :].split()
                for line in text.splitlines()
                for head in (_SIBLINGS, _BOUND)
                if line.startswith(head)
            }
            return cls(
                modules,
                language="js",
                quote=quote,
                semicolon=semicolon,
                spaced=spaced,
                keyword=first.group(1),
                siblings=tuple(extra.get(_SIBLINGS, ())),
                bound=tuple(extra.get(_BOUND, ())),
            )
        for line in text.splitlines():
            m = _STATEMENT.match(line.strip())
            if m is None:
                continue
            if m.group(3):
                plain.append(m.group(3))
            else:
                modules[m.group(1)] = tuple(n.strip() for n in m.group(2).split(",") if n.strip())
        return cls(modules, tuple(plain))

    def as_snippet(self, path: str) -> tuple[str, str, str]:
        return (path, self.as_text(), IMPORT_CHOICES)


def split_choices(
    files: Sequence[tuple[str, str, str]],
) -> tuple[ImportChoices | None, tuple[tuple[str, str, str], ...]]:
    """(the import choices among ``files``, the other snippets): the choices guide decoding and
    are never shown to the model as a file."""
    choices = [ImportChoices.from_text(f[1]) for f in files if f[2] == IMPORT_CHOICES]
    rest = tuple(f for f in files if f[2] != IMPORT_CHOICES)
    return (choices[0] if choices and choices[0] else None), rest


@cache
def _stdlib_names() -> dict[str, tuple[str, ...]]:
    """Public name -> the standard-library modules above that define it (read from the modules
    themselves, so it matches the running Python; nothing is fetched)."""
    out: dict[str, list[str]] = {}
    for module in _STDLIB_FROM:
        try:
            mod = importlib.import_module(module)
        except ImportError:  # pragma: no cover - all are in every CPython
            continue
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for name in names:
            out.setdefault(name, []).append(module)
    return {k: tuple(v) for k, v in out.items()}


class _Layout:
    """Module names of workspace files, from the ``__init__.py`` files the index holds."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self._has: dict[str, bool] = {}
        self._exports: dict[str, set[str]] = {}

    def has(self, rel: str) -> bool:
        if rel not in self._has:
            try:
                self._has[rel] = bool(self.index.has_file(rel))
            except Exception:
                self._has[rel] = False
        return self._has[rel]

    def is_package(self, rel_dir: str) -> bool:
        """A directory with an ``__init__.py``, or one without inside such a package (flask's
        ``sansio``: a namespace package, imported as ``from .sansio.app import App``)."""
        if not rel_dir:
            return False
        if self.has(posixpath.join(rel_dir, "__init__.py")):
            return True
        parent = posixpath.dirname(rel_dir)
        return bool(parent) and self.has(posixpath.join(parent, "__init__.py"))

    def root(self, rel_dir: str) -> str:
        """The directory on ``sys.path`` for a module in ``rel_dir``: above its topmost package."""
        while self.is_package(rel_dir):
            rel_dir = posixpath.dirname(rel_dir)
        return rel_dir

    def parts(self, rel: str) -> tuple[str, list[str]]:
        """(root, dotted parts) of a ``.py`` file; a package's ``__init__.py`` is the package."""
        here = posixpath.dirname(rel)
        root = self.root(here)
        inside = posixpath.relpath(rel[: -len(".py")], root) if root else rel[: -len(".py")]
        parts = inside.split("/")
        if parts[-1] == "__init__":
            parts.pop()
        return root, parts

    def exports(self, rel: str) -> set[str]:
        """Names a module imports (and so re-exports): a package's ``__init__.py``, or any module
        (requests' ``compat``)."""
        if rel not in self._exports:
            try:
                self._exports[rel] = {n for imp in self.index.imports_of(rel) for n in imp.names}
            except Exception:
                self._exports[rel] = set()
        return self._exports[rel]

    def binds(self, rel: str) -> set[str]:
        """Names ``from <rel's module> import name`` can take: its top-level definitions and
        what it imports."""
        try:
            own = {d.name for d in self.index.file_outline(rel) if not d.scope}
        except Exception:
            own = set()
        return own | self.exports(rel)

    def specs(self, importer: str, module: str) -> list[str]:
        """How ``importer`` can name ``module`` (a ``.py`` path) after ``from``: relative when both
        sit in one package tree, and absolute."""
        root, parts = self.parts(module)
        if not parts:
            return []
        out: list[str] = []
        here = posixpath.dirname(importer)
        if self.is_package(here) and self.root(here) == root:
            mine = (posixpath.relpath(here, root) if root else here).split("/")
            common = 0
            while common < min(len(mine), len(parts)) and mine[common] == parts[common]:
                common += 1
            out.append("." * (len(mine) - common + 1) + ".".join(parts[common:]))
        if root in ("", "src") or root == self.root(here):
            out.append(".".join(parts))
        return out


def _by_definition(layout: _Layout, importer: str, name: str, defs: Iterable[Any]) -> list[str]:
    """Modules ``name`` can be imported from: the files defining it at top level and the packages
    above them that re-export it (``from jinja2 import Environment``)."""
    modules: list[str] = []
    for d in defs:
        modules.append(d.path)
        pkg = posixpath.dirname(d.path)
        while layout.is_package(pkg):
            init = posixpath.join(pkg, "__init__.py")
            if init != d.path and name in layout.exports(init):
                modules.append(init)
            pkg = posixpath.dirname(pkg)
    return [spec for m in dict.fromkeys(modules) for spec in layout.specs(importer, m)]


def _module_homes(layout: _Layout, importer: str, name: str, dirs: Iterable[str]) -> tuple[list[str], bool]:
    """(packages ``name`` is a module of, whether it is also a top-level module): ``nodes.Block``
    with no import wants ``from . import nodes`` or ``from jinja2 import nodes``."""
    specs: list[str] = []
    top = False
    for here in dict.fromkeys(dirs):
        module = posixpath.join(here, f"{name}.py") if here else f"{name}.py"
        package = posixpath.join(here, name, "__init__.py") if here else f"{name}/__init__.py"
        if not (layout.has(module) or layout.has(package)):
            continue
        if layout.is_package(here):
            specs.extend(layout.specs(importer, posixpath.join(here, "__init__.py")))
        else:
            top = True
    return specs, top


def _add_listed(
    layout: _Layout,
    listing: str,
    imports: Sequence[Any],
    unbound: Sequence[str],
    modules: dict[str, list[str]],
) -> None:
    """Add to ``modules[listing]`` the ``unbound`` names the listed module binds (see
    ``import_choices``); nothing when it is not a workspace module."""
    target = next((imp.targets[0] for imp in imports if imp.spec == listing and imp.targets), None)
    if target is None:
        return
    gives = layout.binds(target)
    for name in unbound:
        if name in gives and name not in modules.get(listing, ()):
            modules.setdefault(listing, []).append(name)


def _alias_of(index: Any, name: str) -> tuple[str, list[Any]]:
    """(the defined name that ``name`` may be an alias of, its top-level Python definitions), the
    longest such suffix of ``name`` (see the module); ("", []) when none is defined."""
    for m in _ALIAS_SPLIT.finditer(name):
        base = name[m.start() :]
        if len(base) < 3:
            continue
        try:
            found = index.definitions(base, limit=8)
        except Exception:
            log.debug("definitions(%s) failed", base, exc_info=True)
            return "", []
        defs = [d for d in found if not d.scope and d.path.endswith(".py")]
        if defs:
            return base, defs
    return "", []


def import_choices(
    index: Any, importer: str, unbound: Sequence[str], imports: Sequence[Any], listing: str | None = None
) -> ImportChoices:
    """The statements that would bind ``unbound`` names (most used first) of the Python file
    ``importer``: workspace definitions (up to eight per name), modules of the workspace, and the
    standard library; a name defined nowhere, as the defined name it ends with under its own name
    (``SSLError as RequestsSSLError``). A name found nowhere gives no choice (the guide then lets
    the model write what it likes, see ``fimble.completion.engine.guide``).

    ``listing``: the module of a ``from M import (`` list the cursor is in (``open_list``). The
    file has chosen M already, so every missing name M binds is a choice, also one M only imports
    (requests' tests import ``Morsel`` and ``JSONDecodeError`` from ``requests.compat``, which
    takes them from the standard library): without it the guide had no names for such lists."""
    if not importer.endswith(".py"):
        return ImportChoices()
    layout = _Layout(index)
    modules: dict[str, list[str]] = {}
    plain: list[str] = []
    dirs = [posixpath.dirname(importer)]
    dirs += [posixpath.dirname(t) for imp in imports for t in getattr(imp, "targets", ())[:1]]
    dirs += ["", "src"]
    stdlib = _stdlib_names()
    for name in unbound[:24]:
        specs: list[str] = []
        try:
            found = index.definitions(name, limit=8)
        except Exception:
            log.debug("definitions(%s) failed", name, exc_info=True)
            found = ()
        defs = [d for d in found if d.path != importer and not d.scope and d.path.endswith(".py")]
        base = listed = name
        if not found and name not in stdlib:  # maybe a defined name under an alias
            alias_of, found = _alias_of(index, name)
            if alias_of:
                base, listed = alias_of, f"{alias_of} as {name}"
                defs = [d for d in found if d.path != importer]
        specs += _by_definition(layout, importer, base, {d.path: d for d in defs}.values())
        homes, top = _module_homes(layout, importer, name, dirs)
        specs += homes
        specs += stdlib.get(name, ())
        for spec in dict.fromkeys(specs):
            modules.setdefault(spec, [])
            if listed not in modules[spec]:
                modules[spec].append(listed)
        if top or name in sys.stdlib_module_names:
            plain.append(name)
    if listing is not None:
        _add_listed(layout, listing, imports, unbound[:24], modules)
    return ImportChoices({m: tuple(ns) for m, ns in modules.items()}, tuple(dict.fromkeys(plain)))
