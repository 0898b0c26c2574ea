"""`fimble complete PATH:LINE:COL`: one completion from the command line, with its timings."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fimble.errors import InputError

if TYPE_CHECKING:
    from fimble.completion.engine import Engine
    from fimble.completion.service import CompletionResult

__all__ = [
    "Outcome",
    "complete",
    "completion_options",
    "offset_of",
    "parse_location",
    "read_source",
    "run_at",
]

_MAX_BYTES = 8 * 1024 * 1024


def parse_location(location: str) -> tuple[Path, int, int]:
    """Split ``PATH:LINE:COL`` (1-based, as compilers print them); the path may itself contain colons."""
    path, sep1, rest = location.rpartition(":")
    path2, sep2, line = path.rpartition(":")
    if not (sep1 and sep2 and path2):
        raise InputError(f"expected PATH:LINE:COL (1-based), got {location!r}")
    try:
        line_no, col_no = int(line), int(rest)
    except ValueError:
        raise InputError(f"LINE and COL must be numbers in {location!r}") from None
    if line_no < 1 or col_no < 1:
        raise InputError(f"LINE and COL are 1-based; got {line_no}:{col_no}")
    return Path(path2), line_no, col_no


def read_source(path: Path) -> str:
    """Read a text file the way an editor would, refusing what no editor would complete in."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from None
    if len(data) > _MAX_BYTES:
        raise InputError(f"{path}: {len(data)} bytes is too large to complete in (limit {_MAX_BYTES})")
    if b"\0" in data[:8192]:
        raise InputError(f"{path}: looks like a binary file; fimble completes text files")
    try:
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def offset_of(text: str, line: int, col: int, path: Path) -> int:
    """Character offset of 1-based (line, col); col may be one past the end of the line."""
    lines = text.split("\n")
    if line > len(lines):
        raise InputError(f"{path}: line {line} is past the end of the file ({len(lines)} lines)")
    if col > len(lines[line - 1]) + 1:
        raise InputError(
            f"{path}:{line}: column {col} is past the end of the line ({len(lines[line - 1])} characters)"
        )
    return sum(len(x) + 1 for x in lines[: line - 1]) + col - 1


@dataclass(frozen=True)
class Outcome:
    """One completion run from the command line, for `complete` and `explain` to print."""

    engine: Engine
    result: CompletionResult
    text: str
    offset: int
    note: str | None


def run_at(
    location: str,
    *,
    model: str | None,
    max_tokens: int,
    multiline: bool | None,
    threads: int,
    context: bool,
) -> Outcome:
    """Read the file, gather repository context from an existing index, load the model, complete."""
    from fimble.commands._workspace import workspace_context
    from fimble.completion.engine.loading import load_engine
    from fimble.completion.service import CompletionRequest
    from fimble.completion.service import complete as run_completion

    path, line, col = parse_location(location)
    text = read_source(path)
    offset = offset_of(text, line, col, path)
    files, shown_path, note = workspace_context(path, text, offset) if context else ((), path.name, None)
    engine = load_engine(model, threads=threads)
    request = CompletionRequest(
        text=text,
        offset=offset,
        path=shown_path,
        max_tokens=max_tokens,
        multiline=multiline,
        context_files=files,
    )
    return Outcome(engine, run_completion(engine, request), text, offset, note)


def completion_options(fn: Callable[..., None]) -> Callable[..., None]:
    """The options `complete` and `explain` share."""
    for option in reversed(
        (
            click.argument("location", metavar="PATH:LINE:COL"),
            click.option(
                "--model", "-m", default=None, help="Model name from `fimble models list`, or a .gguf path."
            ),
            click.option("--max-tokens", "-n", default=64, show_default=True, type=click.IntRange(1, 1024)),
            click.option(
                "--multiline/--single-line",
                default=None,
                help="Force the suggestion's shape (default: decide from the cursor).",
            ),
            click.option(
                "--threads",
                "-t",
                default=0,
                type=click.IntRange(0, 256),
                help="CPU threads (0: physical cores).",
            ),
            click.option(
                "--context/--no-context",
                default=True,
                show_default=True,
                help="Add repository context from the workspace's index (built by `fimble index`).",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print the result and timings as JSON."),
        )
    ):
        fn = option(fn)
    return fn


def outcome_json(out: Outcome) -> str:
    gen = out.result.generation
    return json.dumps(
        {
            "completion": out.result.text,
            "multiline": out.result.multiline,
            "shape": out.result.shape,
            "model": str(out.engine.model_path),
            "fim_family": out.engine.fim.family,
            "load_ms": round(out.engine.load_ms, 1),
            "cpu_path": str(cpu.path) if (cpu := getattr(out.engine, "cpu", None)) else None,
            **{k: v for k, v in asdict(gen).items() if k not in ("text", "tokens")},
            "tokens_generated": len(gen.tokens),
            "parts": [asdict(p) for p in out.result.parts],
            "note": out.note,
        },
        indent=2,
    )


def timings_line(out: Outcome) -> str:
    from fimble.completion.report import timings_line as line

    return line(out.result.generation)


@click.command()
@completion_options
def complete(location: str, as_json: bool, **options: Any) -> None:
    """Complete the code at PATH:LINE:COL (1-based line and character column) and print the suggestion.

    Repository context comes from the workspace's index when `fimble index` has built one.

    Example: fimble complete src/app.py:42:17
    """
    out = run_at(location, **options)
    if as_json:
        click.echo(outcome_json(out))
        return
    line_prefix = out.text[: out.offset].rsplit("\n", 1)[-1]
    click.echo(location)
    click.echo(
        click.style(line_prefix, dim=True)
        + click.style(out.result.text or "(no suggestion)", fg="green", bold=True)
    )
    if out.note:
        print(f"note: {out.note}", file=sys.stderr)
    engine = out.engine
    cpu = getattr(engine, "cpu", None)  # a remote backend runs on someone else's CPU
    print(
        f"model {engine.model_path.name} ({engine.fim.family}), loaded in {engine.load_ms:.0f} ms"
        + (f"; CPU path {cpu.summary()}" if cpu is not None else ""),
        file=sys.stderr,
    )
    print(timings_line(out), file=sys.stderr)
