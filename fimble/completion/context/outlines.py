"""Rendering what the index knows about other files as compact prompt text.

Outlines of imported modules, a package's re-exports followed to their definitions, the files a
file's imports reach, and one definition as a chunk (a class as its skeleton, a method under its
class). Reads the index through the small protocol below; failures of one read mean less text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

from fimble.completion.context.skeletons import (
    Source,
    class_skeleton,
    members_by_class,
    method_in_class,
    one_line,
)

__all__ = ["TEST_FILE", "definition_chunk", "outlines", "reachable", "reexports", "render_outline"]

log = logging.getLogger(__name__)

_REACH_FILES = 40  # files reachable through imports whose outlines are read (two hops)
TEST_FILE = re.compile(r"(^|/)(tests?/|test_[^/]*$|[^/]*_test\.\w+$)")


class _Reader(Protocol):
    def file_outline(self, path: str) -> Sequence[Any]: ...

    def imports_of(self, path: str) -> Sequence[Any]: ...


def render_outline(
    defs: Sequence[Any],
    names: set[str] | None = None,
    limit: int = 40,
    *,
    brief: bool = False,
    wanted: set[str] = frozenset(),  # type: ignore[assignment]
    max_chars: int = 1600,
    source: Source | None = None,
    first: set[str] = frozenset(),  # type: ignore[assignment]
) -> str:
    """Signatures (with their first doc line) of a module, optionally only the names it exports to us.

    A class is shown as its skeleton (header and one line per method, the ``wanted`` ones first), so
    an imported class with fifty documented methods costs a few hundred tokens, not a thousand that
    would not fit the budget at all. ``brief``: top-level signatures only, without doc lines (a
    whole module's names, compactly). ``first``: names shown before the others (imported but not
    used yet: what the line being written is about to use). At most ``limit`` entries and about
    ``max_chars``; an entry that does not fit is skipped, a smaller one after it may still fit.
    """
    members = members_by_class(defs)
    lines: list[str] = []
    used = 0
    ordered = [d for d in defs if d.name in first] + [d for d in defs if d.name not in first]
    for d in ordered:
        if names and d.name not in names and d.qualname.split(".")[0] not in names:
            continue
        if getattr(d, "scope", ""):
            continue  # shown in its class's skeleton
        if d.kind == "class" and not brief and d.qualname in members:
            sig = class_skeleton(d, members[d.qualname], wanted, min(900, max_chars), source)
        else:
            sig = d.signature.rstrip()
            if d.doc and not brief:
                indent = " " * (len(sig.splitlines()[-1]) - len(sig.splitlines()[-1].lstrip()) + 4)
                sig += f'\n{indent}"""{d.doc}"""' if d.path.endswith(".py") else f"  // {d.doc}"
        if lines and used + len(sig) > max_chars:
            continue
        used += len(sig) + 1
        lines.append(sig)
        if len(lines) >= limit:
            break
    return "\n".join(lines)


def reexports(
    index: _Reader,
    target: str,
    names: set[str] | None = None,
    used: set[str] = frozenset(),  # type: ignore[assignment]
    near: set[str] = frozenset(),  # type: ignore[assignment]
    max_chars: int = 1400,
    source: Source | None = None,
    first: set[str] = frozenset(),  # type: ignore[assignment]
) -> str:
    """What ``import pkg`` makes available as ``pkg.a``: a package's ``from .x import a, b`` lines,
    with the *definitions* (signatures; class skeletons) of the names this file uses, followed from
    the re-export into the module that defines them, so ``requests.post(`` shows ``def post(url,
    data=None, json=None, **kwargs)`` and not only that ``post`` exists. Names used near the cursor
    first, with the names ``first`` (imported but not used yet); then names used elsewhere in the
    file; the others are listed as import lines, which always keep a share of the space: a name's
    mere existence (``HandoffOutputItem`` beside ``HandoffCallItem``) is often what the line needs.
    ``names``: only these (``from pkg import a``)."""
    if not target.endswith("__init__.py"):
        return ""
    entries: list[tuple[int, int, str]] = []
    plain: list[str] = []
    for imp in index.imports_of(target):
        spec = getattr(imp, "spec", "")
        if not (imp.names and spec and imp.targets):
            continue  # ``from logging import NullHandler`` in a package: not its API
        wanted = [n for n in imp.names if (not names or n in names) and not n.startswith("__")]
        defs: dict[str, Any] = {}
        members: dict[str, list] = {}
        if imp.targets and any(n in used or n in near or n in first for n in wanted):
            try:
                outline = index.file_outline(imp.targets[0])
            except Exception:
                outline = ()
            defs = {d.name: d for d in outline if not getattr(d, "scope", "")}
            members = members_by_class(outline)
        rest = []
        for n in wanted:
            d = defs.get(n)
            rank = 0 if n in first else 1 if n in near else 2 if n in used else 3
            if d is None or rank == 3:
                rest.append(n)
            elif d.kind == "class":
                limit = 700 if rank <= 1 else 300
                skeleton = class_skeleton(d, members.get(d.qualname, []), near, limit, source)
                entries.append((rank, len(entries), skeleton))
            else:
                doc = f'\n    """{d.doc}"""' if rank <= 1 and d.doc and d.path.endswith(".py") else ""
                entries.append((rank, len(entries), one_line(d.signature) + doc))
        if rest:
            plain.append(f"from {spec} import {', '.join(rest)}")
    reserved = _fit_lines(plain[:30], max_chars // 3)
    out: list[str] = []
    size = sum(len(t) + 1 for t in reserved)
    for text in [t for _, _, t in sorted(entries)] + plain[len(reserved) : 30]:
        if size + len(text) > max_chars or text in reserved:
            continue
        size += len(text) + 1
        out.append(text)
    skeletons = len(out) - len([t for t in out if t in plain])
    return "\n".join([*out[:skeletons], *reserved, *out[skeletons:]])


def _fit_lines(lines: Sequence[str], budget: int) -> list[str]:
    """Whole ``from m import a, b`` lines while they fit ``budget`` characters; the first that does
    not fit is cut after a whole name (``from m import a, b``), so some names always show."""
    out: list[str] = []
    size = 0
    for text in lines:
        if size + len(text) + 1 <= budget:
            out.append(text)
            size += len(text) + 1
            continue
        cut = text[: max(0, budget - size)]
        if ", " in cut and " import " in cut:
            out.append(cut[: cut.rfind(", ")])
        break
    return out


def reachable(index: _Reader, path: str, imports: Sequence[Any]) -> list[str]:
    """Workspace files this file's imports lead to, two hops deep (a package's ``__init__``
    re-exports its modules), nearest first, plus the pytest ``conftest.py`` files above it (where
    its fixtures come from)."""
    out: dict[str, None] = {}
    first = [t for imp in imports for t in imp.targets]
    out.update(dict.fromkeys(first))
    for target in list(dict.fromkeys(first)):
        if len(out) >= _REACH_FILES:
            break
        try:
            out.update(dict.fromkeys(t for imp in index.imports_of(target) for t in imp.targets))
        except Exception:
            log.debug("imports_of(%s) failed", target, exc_info=True)
    parts = path.split("/")[:-1]
    for k in range(len(parts), -1, -1):
        out.setdefault("/".join([*parts[:k], "conftest.py"]), None)
    out.pop(path, None)
    return list(out)[: _REACH_FILES + len(parts) + 1]


def outlines(index: _Reader, paths: Sequence[str]) -> dict[str, Sequence[Any]]:
    out: dict[str, Sequence[Any]] = {}
    for p in paths:
        try:
            defs = index.file_outline(p)
        except Exception:
            log.debug("file_outline(%s) failed", p, exc_info=True)
            continue
        if defs:
            out[p] = defs
    return out


def definition_chunk(
    d: Any,
    classes: dict[tuple[str, str], Any],
    members: dict[tuple[str, str], list],
    source: Source | None = None,
) -> str:
    """A class as its skeleton (header and method signatures), a method under its class's header,
    anything else as its signature and doc line."""
    if d.kind == "class" and (d.path, d.qualname) in members:
        return class_skeleton(d, members[(d.path, d.qualname)], limit_chars=900, source=source)
    scope = getattr(d, "scope", "")
    if scope:
        return method_in_class(d, classes.get((d.path, scope)))
    return d.signature.rstrip() + (f"\n    # {d.doc}" if d.doc else "")
