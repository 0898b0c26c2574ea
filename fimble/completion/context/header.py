"""The file's own import lines, for a prefix that starts below them.

A small first prompt reads only the ~256 tokens above the cursor. In a file with a long doc comment
or a long function that is far below the imports, and the model then writes the names it knows in
general instead of the ones this file can use: rxjs's ``audit.ts`` line 54 came back as an rxjs 6
``return function auditOperator(source: ...`` where the file imports ``operate`` (seed 2, both
operators with that line), requests' ``models.py`` wrote ``str(length)`` where it imports
``builtin_str``. ``fimble.completion.prompt.fim.build_prompt`` opens such a prefix with these lines.
"""

from __future__ import annotations

from fimble.completion.context import js_imports, unbound

__all__ = ["import_header"]

# Only the top of a file is searched: imports below this are rare and the prefix is large.
_HEADER_LINES = 200


def import_header(prefix: str, path: str | None) -> list[tuple[int, str]]:
    """(row, line with its line end) of the top-level import statements above the cursor's line,
    for Python, JavaScript and TypeScript files; other languages get none."""
    if not path:
        return []
    if path.endswith((".py", ".pyi")):
        rows_of, indented_ok = unbound.import_rows, False
    elif js_imports.is_js(path):
        rows_of, indented_ok = js_imports.import_rows, True
    else:
        return []
    cut = prefix.rfind("\n") + 1
    lines = prefix[:cut].splitlines(keepends=True)[:_HEADER_LINES]
    rows = sorted(rows_of(lines))
    out: list[tuple[int, str]] = []
    for row in rows:
        text = lines[row]
        top = not text[:1].isspace()
        # A statement's own continuation rows (a name list) follow it; an indented import elsewhere is
        # a function's own (Python) and says nothing about the file.
        if top or indented_ok or (out and out[-1][0] == row - 1):
            out.append((row, text if text.endswith("\n") else text + "\n"))
    return out
