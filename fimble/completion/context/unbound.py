"""Names a file uses but does not bind, and where the workspace defines them.

When the cursor is among a file's imports, the import being written is most likely for a name the
code below already uses but nothing binds yet (``logger.warning(...)`` with no ``logger`` import;
the eval masks exactly such a line). These helpers find those names — textually, skipping strings,
comments, attributes, keyword arguments, parameters, assignments and loop variables — and look
each up in the index, so the context can show its definition under its own file's path (the model
then writes ``from .logger import logger``). Index failures mean fewer chunks, never an error.
"""

from __future__ import annotations

import builtins
import keyword
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from fimble.completion.context.outlines import definition_chunk
from fimble.completion.context.skeletons import Source

__all__ = [
    "PYTHON_BUILTINS",
    "bound_names",
    "code_only",
    "import_rows",
    "imported_names",
    "starts_import",
    "statement_rows",
    "unbound_definitions",
    "unbound_names",
]

log = logging.getLogger(__name__)

# Names Python itself provides: never a workspace definition when written bare.
PYTHON_BUILTINS = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"self", "cls"}


def statement_rows(lines: Sequence[str], starts: Callable[[str], bool], brackets: str) -> set[int]:
    """Rows of the statements whose stripped first line ``starts`` says begins one, with the rows
    of a name list in ``brackets`` ("()" or "{}") left open on that line until it closes."""
    opening, closing = brackets
    rows: set[int] = set()
    open_list = False
    for row, line in enumerate(lines):
        text = line.strip()
        if open_list:
            rows.add(row)
            open_list = closing not in text
        elif starts(text):
            rows.add(row)
            open_list = opening in text and closing not in text
    return rows


def starts_import(text: str) -> bool:
    """Whether a stripped line begins an ``import``/``from ... import`` statement, also one whose
    names are not written yet (``from .testing import``: flask's import inside a method, asked
    mid-line, was not one, so it had no import block and no import guide)."""
    if text.startswith("import "):
        return True
    return text.startswith("from ") and (" import " in text or text.endswith(" import"))


def import_rows(lines: Sequence[str]) -> set[int]:
    """Rows of ``import``/``from ... import`` statements, a parenthesised name list included."""
    return statement_rows(lines, starts_import, "()")


def imported_names(lines: Sequence[str], rows: set[int]) -> set[str]:
    """Names the import statements on ``rows`` bind (``a.b as c`` binds ``c``, ``import a.b`` binds
    ``a``), read from the text: the editor's buffer is newer than the index's copy of the file."""
    out: set[str] = set()
    for row in rows:
        text = lines[row].split("#", 1)[0].strip()
        if text.startswith("from ") and " import " in text:
            text = text.split(" import ", 1)[1]
        elif text.startswith("import "):
            text = text[len("import ") :]
        for item in text.strip("()\\ ").split(","):
            words = item.split()
            if len(words) == 3 and words[1] == "as":
                out.add(words[2])
            elif len(words) == 1 and words[0] != "*":
                out.add(words[0].split(".")[0])
    return out


_BOUND_HERE = re.compile(
    r"\b(?:def|class)\s+([A-Za-z_]\w*)|\b(?:for|as|import|global|nonlocal)\s+([A-Za-z_]\w*)|"
    r"^\s*([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)",
    re.M,
)
# Parameter lists of ``def f(...)`` (nested brackets one level deep) and ``lambda a, b:``.
_PARAMS = re.compile(r"\bdef\s+\w+\s*\(((?:[^()]|\([^()]*\))*)\)|\blambda\b([^:]*):")
_PARAM = re.compile(r"(?:^|,)\s*\*{0,2}([A-Za-z_]\w*)")
_STRINGS = re.compile(r"(\"\"\"|''')[\s\S]*?\1|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|#[^\n]*")
_USE = re.compile(r"(?<![.\w])([A-Za-z_][A-Za-z0-9_]{2,})\b(?!\s*=[^=])")
# Names written in strings that are still uses: a forward reference in an annotation (``-> "Trace"``,
# ``list["MCPServer"]``) and a package's ``__all__`` entries (what its import lines are for).
_FORWARD_REF = re.compile(
    r"(?:->|:|\[|\|)\s*(['\"])([A-Za-z_][\w.]*(?:\[[\w., |\[\]]*\])?(?:\s*\|\s*None)?)\1"
)
_ALL = re.compile(r"^__all__\s*(?::[^=\n]*)?[+]?=\s*[\[(]([^\])]*)[\])]", re.M)
_QUOTED_NAME = re.compile(r"['\"]([A-Za-z_]\w*)['\"]")
_REF_NAME = re.compile(r"(?<![.\w])([A-Z]\w{2,})")  # classes: a dict's ``"key": "value"`` is not one


def code_only(text: str) -> str:
    """``text`` with Python strings and comments blanked, line for line (a docstring's words are
    prose, not names the code uses; line numbers stay those of ``text``)."""
    return _STRINGS.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def unbound_names(body: str, bound: set[str], limit: int = 12) -> list[str]:
    """Names the file's code uses that nothing in the file binds (no import, definition, assignment,
    parameter or loop variable): what an import being written is most likely for. Most frequent
    first; attributes (``x.name``) and keyword arguments do not count; names in forward references
    and in ``__all__`` do (after the others)."""
    quoted = [n for m in _FORWARD_REF.finditer(body) for n in _REF_NAME.findall(m.group(2))]
    quoted += [n for m in _ALL.finditer(body) for n in _QUOTED_NAME.findall(m.group(1))]
    body = _STRINGS.sub('""', body)
    here = {next(g for g in m.groups() if g) for m in _BOUND_HERE.finditer(body)}
    for m in _PARAMS.finditer(body):
        here.update(_PARAM.findall(re.sub(r"\[[^\]]*\]", "", m.group(1) or m.group(2) or "")))
    counts: dict[str, int] = {}
    for m in _USE.finditer(body):
        name = m.group(1)
        if name not in bound and name not in here and name not in PYTHON_BUILTINS:
            counts[name] = counts.get(name, 0) + 1
    found = sorted(counts, key=lambda n: -counts[n])
    for name in dict.fromkeys(quoted):
        if name not in counts and name not in bound and name not in here and name not in PYTHON_BUILTINS:
            found.append(name)
    return found[:limit]


def bound_names(index: Any, path: str, imports: Sequence[Any]) -> set[str]:
    """Names the file's imports and top-level definitions bind."""
    bound = {n for imp in imports for n in imp.names}
    bound |= {(getattr(imp, "spec", "") or "").split(".")[0] for imp in imports}
    try:
        bound |= {d.name for d in index.file_outline(path)}
    except Exception:
        log.debug("file_outline(%s) failed", path, exc_info=True)
    return bound


def unbound_definitions(
    index: Any,
    path: str,
    unbound: Sequence[str],
    seen: set[tuple[str, str]],
    source: Source | None = None,
    max_chunks: int = 4,
) -> list[tuple[Any, str, str]]:
    """Among the imports: the definitions of names the file uses that no import binds yet, found
    anywhere in the workspace (one definition only, at top level, not in the current file), each
    under its file's path, so the model can write ``from .logger import logger``: (definition, name,
    chunk text), at most ``max_chunks``. ``seen`` (path, qualname) pairs are skipped and extended."""
    lookup = getattr(index, "definitions", None)
    if lookup is None:
        return []
    out: list[tuple[Any, str, str]] = []
    for name in unbound[:12]:
        try:
            found = [d for d in lookup(name, limit=4) if d.path != path and not getattr(d, "scope", "")]
        except Exception:
            log.debug("definitions(%s) failed", name, exc_info=True)
            continue
        if len({d.path for d in found}) != 1 or (found[0].path, found[0].qualname) in seen:
            continue
        d = found[0]
        seen.add((d.path, d.qualname))
        out.append((d, name, definition_chunk(d, {}, {(d.path, d.qualname): _members(index, d)}, source)))
        if len(out) >= max_chunks:
            break
    return out


def _members(index: Any, d: Any) -> list:
    if d.kind != "class":
        return []
    try:
        return [m for m in index.file_outline(d.path) if getattr(m, "scope", "") == d.qualname]
    except Exception:
        return []
