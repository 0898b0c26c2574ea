"""``fimble batch --docstrings PATH``: docstrings for the Python defs that lack one, as one diff.

The model fills in the middle after an opening ``\"\"\"`` right under each header, so it sees the
signature above and the body below, and writes up to its own closing quotes (a stop string). The
closing quotes are not put in the suffix: then the quote-balance stop rule ends the answer at the
first quote the model writes, and the 0.5B model answered with nothing at all. Every target of
every file is one FIM item, and all of them go through ``run_batch`` as a ``fimble batch`` input
file would. Files are never edited here: the caller prints the unified diff (``git apply`` accepts
it) or writes ``new_texts`` when asked.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fimble.batch.items import BatchItem
from fimble.batch.journal import Journal
from fimble.batch.runner import BatchSummary, run_batch
from fimble.completion.engine import Engine
from fimble.completion.prompt.raw_prompt import RawPrompt
from fimble.completion.raw_requests import GenerationOptions

__all__ = ["DocTarget", "DocstringRun", "diff_root", "find_targets", "python_files", "run_docstrings"]

_QUOTES = '"""'
_DEFS = ("function_definition", "class_definition")
_SKIP_DIRS = frozenset({"venv", "env", "node_modules", "__pycache__", "site-packages", "build", "dist"})


@dataclass(frozen=True)
class DocTarget:
    """A def without a docstring: ``offset`` (in characters) is the start of the line right under its
    header, where the docstring goes; ``indent`` is the body's; ``line`` is the def's, 1-based."""

    name: str
    line: int
    offset: int
    indent: str


@dataclass
class DocstringRun:
    """What a run produced: the diff, each changed file's new text, and the runner's summary."""

    diff: str = ""
    new_texts: dict[Path, str] = field(default_factory=dict)
    targets: int = 0
    summary: BatchSummary = field(default_factory=BatchSummary)


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def python_files(path: Path) -> list[Path]:
    """``path`` itself, or every ``.py`` under it, sorted: hidden directories and virtualenvs (which
    hold other people's code) are left out."""
    if path.is_file():
        return [path]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(path):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS and not _is_venv(here / d)
        )
        found.extend(here / f for f in sorted(filenames) if f.endswith(".py") and not f.startswith("."))
    return found


def diff_root(path: Path) -> Path:
    """Where diff paths are relative to: the enclosing git repository's root, else PATH's parent, so
    ``git apply`` run from there finds the files."""
    start = path.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start.parent


def _has_docstring(body: object) -> bool:
    for child in body.named_children:  # type: ignore[attr-defined]
        if child.type == "comment":
            continue
        return (
            child.type == "expression_statement"
            and child.named_child_count > 0
            and (child.named_children[0].type in ("string", "concatenated_string"))
        )
    return False


def _walk(node: object) -> Iterator[object]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))  # type: ignore[attr-defined]


def find_targets(text: str) -> list[DocTarget]:
    """Every function and class (nested, async, decorated) whose body does not open with a string, in
    file order. One-line defs (``def f(): ...``) are left alone: they have no body line to go above."""
    from fimble.indexer.parse import parser

    tree = parser("python").parse(text.encode("utf-8"))
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    targets: list[DocTarget] = []
    for node in _walk(tree.root_node):
        if node.type not in _DEFS:  # type: ignore[attr-defined]
            continue
        body = node.child_by_field_name("body")  # type: ignore[attr-defined]
        name = node.child_by_field_name("name")  # type: ignore[attr-defined]
        if body is None or name is None or body.has_error or _has_docstring(body):
            continue
        # The ":" ending the header; a comment after it may sit between it and the body.
        colon = next((c for c in reversed(node.children) if c.type == ":"), None)  # type: ignore[attr-defined]
        header_row = colon.end_point[0] if colon is not None else node.start_point[0]  # type: ignore[attr-defined]
        body_row = body.start_point[0]
        if body_row <= header_row or body_row >= len(lines):
            continue
        body_line = lines[body_row]
        indent = body_line[: len(body_line) - len(body_line.lstrip(" \t"))]
        targets.append(
            DocTarget(
                name.text.decode("utf-8", "replace"), node.start_point[0] + 1, starts[header_row + 1], indent
            )
        )
    return targets


def _docstring(answer: str, indent: str) -> str | None:
    """The lines to insert for ``answer``, or None when there is nothing safe to insert: empty, or a
    text that would end the string early (``\"\"\"``) or escape its closing quote (a final backslash)."""
    text = answer.strip()
    if not text or _QUOTES in text or text.endswith(("\\", '"')):
        return None
    first, *rest = text.splitlines()
    if not rest:
        return f"{indent}{_QUOTES}{first.strip()}{_QUOTES}\n"
    body = "".join(f"{indent}{line.strip()}\n" if line.strip() else "\n" for line in rest)
    return f"{indent}{_QUOTES}{first.strip()}\n{body}{indent}{_QUOTES}\n"


def _read(file: Path) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def run_docstrings(
    engine: Engine,
    path: Path,
    *,
    width: int = 1,
    max_tokens: int = 64,
    on_progress: Callable[[int, int], None] | None = None,
) -> DocstringRun:
    """Generate a docstring for every target under ``path`` and return the diff; nothing is written.

    The journal lives in a temporary directory: a docstring run is short and its answers only count
    once the whole diff is built, so there is nothing to resume."""
    root = diff_root(path)
    texts: dict[Path, str] = {}
    where: dict[str, tuple[Path, DocTarget]] = {}
    items: list[BatchItem] = []
    options = GenerationOptions(max_tokens=max_tokens, stop=(_QUOTES,), multiline=True)
    for file in python_files(path):
        text = _read(file)
        if text is None:
            continue
        rel = os.path.relpath(file.resolve(), root).replace(os.sep, "/")
        texts[file] = text
        for target in find_targets(text):
            item_id = f"{rel}:{target.line}:{target.name}"
            where[item_id] = (file, target)
            prefix = text[: target.offset] + target.indent + _QUOTES
            suffix = text[target.offset :]
            items.append(
                BatchItem(item_id, RawPrompt(prefix, suffix, fim=True, path=rel), options, target.line)
            )
    answers: dict[str, str] = {}

    def keep(line: str) -> None:
        record = json.loads(line)
        if "text" in record:
            answers[record["id"]] = record["text"]

    result = DocstringRun(targets=len(items))
    with (
        tempfile.TemporaryDirectory(prefix="fimble-docstrings-") as tmp,
        Journal(Path(tmp) / "out.jsonl") as journal,
    ):
        result.summary = run_batch(
            engine, items, journal, width=width, on_progress=on_progress, on_record=keep
        )
    inserts: dict[Path, list[tuple[int, str]]] = {}
    for item_id, (file, target) in where.items():
        if item_id in answers and (doc := _docstring(answers[item_id], target.indent)) is not None:
            inserts.setdefault(file, []).append((target.offset, doc))
    chunks: list[str] = []
    for file, text in texts.items():
        if file not in inserts:
            continue
        new = text
        for offset, doc in sorted(inserts[file], reverse=True):  # bottom-up: earlier offsets stay valid
            new = new[:offset] + doc + new[offset:]
        result.new_texts[file] = new
        rel = os.path.relpath(file.resolve(), root).replace(os.sep, "/")
        lines = difflib.unified_diff(text.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}")
        # A last line without a newline needs git's marker, or the patch does not apply.
        chunks.extend(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        )
    result.diff = "".join(chunks)
    return result
