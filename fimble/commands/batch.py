"""`fimble batch IN.jsonl -o OUT.jsonl`: many completions from a file, resumable after any crash."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from fimble.completion.prompt.raw_prompt import RawPrompt

__all__ = ["MAX_WIDTH", "batch"]

# llama.cpp holds at most 256 sequences (``LLAMA_MAX_SEQ``); the editor's slot and its parking take two.
MAX_WIDTH = 254


class _Positions:
    """Resolves ``path`` + ``line``/``col`` items: the file's text around the place, with repository
    context from its workspace's index (opened once per workspace, read-only, as `complete` does)."""

    def __init__(self, base: Path, context: bool) -> None:
        self._base = base
        self._context = context
        self._indexes: dict[Path, Any] = {}
        self._stack = contextlib.ExitStack()

    def close(self) -> None:
        self._stack.close()

    def _index(self, root: Path) -> Any:
        if root not in self._indexes:
            from fimble.errors import FimbleError
            from fimble.indexer import WorkspaceIndex

            try:
                self._indexes[root] = self._stack.enter_context(WorkspaceIndex.open(root, writable=False))
            except FimbleError:
                self._indexes[root] = None  # no index (yet): items there run without context
        return self._indexes[root]

    def __call__(self, path: str, line: int, col: int) -> RawPrompt:
        from fimble.commands._workspace import workspace_root
        from fimble.commands.complete import offset_of, read_source
        from fimble.completion.context.gather import gather_context
        from fimble.completion.prompt.raw_prompt import RawPrompt

        file = (self._base / path) if not Path(path).is_absolute() else Path(path)
        text = read_source(file)
        offset = offset_of(text, line, col, file)
        root = workspace_root(file)
        rel = file.resolve().relative_to(root).as_posix()
        files: tuple[tuple[str, str, str], ...] = ()
        if self._context and (index := self._index(root)) is not None:
            chunks = gather_context(index, rel, text, text.count("\n", 0, offset))
            files = tuple(c.as_tuple() for c in chunks)
        return RawPrompt(text[:offset], text[offset:], fim=True, path=rel, files=files)


class _Width(click.ParamType):
    """``auto`` (0 here: chosen by ``_auto_width``) or a width from 1 to ``MAX_WIDTH``."""

    name = "auto|1-254"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) or str(value).strip().lower() != "auto":
            try:
                width = int(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is neither 'auto' nor a number", param, ctx)
            if not 1 <= width <= MAX_WIDTH:
                self.fail(f"{width} is not in the range 1<=x<={MAX_WIDTH}", param, ctx)
            return width
        return 0


def _auto_width(model: str | None, threads: int, requests: int | None, quiet: bool) -> int:
    """The width for ``requests`` requests (None: not known yet) on this machine: the throughput
    curve's knee within the KV memory available (``fimble.batch.width``). The curve is measured on
    the first run here (about a minute for the 1.5B model on 2 cores) and kept."""
    from fimble.batch.width import PROBE_WIDTHS, Measured, cached_curve, choose_width, measure_curve
    from fimble.completion.engine.config import default_threads
    from fimble.completion.engine.loading import load_engine
    from fimble.models import cpu_path, registry, store

    path = store.resolve(model or registry.default_name())
    nthreads = threads or default_threads()
    show = not quiet and sys.stderr.isatty()

    def measure() -> Measured:
        if not quiet:
            click.echo("measuring batch throughput on this machine (once per model and CPU)", err=True)
        probe = load_engine(model, threads=threads, n_ctx=4096, batch_slots=max(PROBE_WIDTHS))
        bar = click.progressbar(length=len(PROBE_WIDTHS), label="widths", file=sys.stderr)
        try:
            with bar if show else contextlib.nullcontext():
                curve = measure_curve(probe, on_width=lambda _w: bar.update(1) if show else None)
            return Measured(curve, probe.model.kv_bytes_per_cell)
        finally:
            probe.close()

    measured = cached_curve(cpu_path.probe_key(path), nthreads, measure)
    choice = choose_width(
        measured.curve, MAX_WIDTH if requests is None else requests, measured.bytes_per_cell, most=MAX_WIDTH
    )
    if not quiet:
        click.echo(choice.reason(), err=True)
    return choice.width


def _engine(model: str | None, threads: int, width: int) -> Any:
    from fimble.batch.width import CELLS_PER_SEQ
    from fimble.completion.engine.loading import load_engine

    # Each batch slot may hold a prompt and its answer; the KV cells are shared by all (unified).
    n_ctx = 4096 if width == 1 else min(32768, max(4096, CELLS_PER_SEQ * width))
    return load_engine(model, threads=threads, n_ctx=n_ctx, batch_slots=0 if width == 1 else width)


def _run_docstrings(
    path: Path,
    output: str | None,
    write: bool,
    width: int,
    max_tokens: int,
    model: str | None,
    threads: int,
    quiet: bool,
) -> None:
    """The --docstrings run: the diff to stdout or ``output``; the files only with ``write``."""
    from fimble.batch.docstrings import run_docstrings

    if width == 0:
        width = _auto_width(model, threads, None, quiet)
    engine = _engine(model, threads, width)
    show = not quiet and sys.stderr.isatty()
    try:
        bar = click.progressbar(length=0, label="docstrings", file=sys.stderr, show_pos=True)
        last = [0]

        def progress(finished: int, total: int) -> None:
            if show:
                bar.length = total
                bar.update(finished - last[0])
                last[0] = finished

        result = run_docstrings(engine, path, width=width, max_tokens=max_tokens, on_progress=progress)
        if show:
            bar.render_finish()
    finally:
        engine.close()
    if output is None:
        click.echo(result.diff, nl=False)
    else:
        Path(output).write_text(result.diff, encoding="utf-8")
    if write:
        for file, text in result.new_texts.items():
            file.write_text(text, encoding="utf-8")
    click.echo(
        f"{len(result.new_texts)} files, {result.targets} defs without a docstring, "
        f"{result.summary.errors} errors" + (" (written)" if write else ""),
        err=True,
    )


@click.command()
@click.argument(
    "requests", metavar="[IN.jsonl]", required=False, type=click.Path(dir_okay=False, allow_dash=True)
)
@click.option(
    "--output",
    "-o",
    default=None,
    type=click.Path(dir_okay=False),
    help="Where records go (JSONL); with --docstrings, where the diff goes (default: stdout).",
)
@click.option(
    "--docstrings",
    "doc_path",
    default=None,
    type=click.Path(exists=True, path_type=Path),
    help="Write docstrings for the Python functions and classes under this file or directory that "
    "lack one, as a unified diff (instead of IN.jsonl).",
)
@click.option("--write", is_flag=True, help="With --docstrings: apply the diff to the files too.")
@click.option(
    "--max-tokens",
    default=64,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="With --docstrings: the longest docstring, in tokens.",
)
@click.option(
    "--width",
    "-w",
    default="auto",
    show_default=True,
    type=_Width(),
    help="Requests decoded together, one KV sequence each (1: one at a time; auto: where this "
    "machine's measured decode throughput stops growing, within the memory available).",
)
@click.option("--model", "-m", default=None, help="Model name from `fimble models list`, or a .gguf path.")
@click.option(
    "--threads", "-t", default=0, type=click.IntRange(0, 256), help="CPU threads (0: physical cores)."
)
@click.option(
    "--context/--no-context",
    default=True,
    show_default=True,
    help="Repository context for `path` items, from the workspace's index (`fimble index`).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a summary of the run as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def batch(
    requests: str | None,
    output: str | None,
    doc_path: Path | None,
    write: bool,
    max_tokens: int,
    width: int,
    model: str | None,
    threads: int,
    context: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Complete every request in IN.jsonl (one JSON object per line) and write one record per line to
    --output.

    Each line has an "id" and one of: "path" + "line"/"col" (1-based, a place in a file, with
    repository context), "prefix"/"suffix" (fill in the middle) or "prompt" (plain text); optional
    "max_tokens", "stop", "multiline". A bad line gets an error record; the run goes on.

    Finished ids are journaled beside the output (OUT.jsonl.journal/): run the same command again
    after an interruption and it does only what is left.

    Example: fimble batch requests.jsonl -o answers.jsonl

    With --docstrings PATH instead of IN.jsonl, every Python function and class under PATH without a
    docstring gets one, and the result is a unified diff on stdout (or in -o); files change only with
    --write. Diff paths are relative to the git repository that holds PATH (else PATH's parent
    directory): run `git apply` there. Progress and logs go to stderr.

    Example: fimble batch --docstrings src/ -o docs.diff && git apply docs.diff
    """
    from fimble.batch import Journal, parse_items, run_batch

    if doc_path is not None:
        if requests is not None:
            raise click.UsageError("give either IN.jsonl or --docstrings PATH, not both")
        _run_docstrings(doc_path, output, write, width, max_tokens, model, threads, quiet)
        return
    if requests is None:
        raise click.UsageError("missing IN.jsonl (or --docstrings PATH)")
    if output is None:
        raise click.UsageError("missing --output/-o: where the records go")

    source = sys.stdin if requests == "-" else open(requests, encoding="utf-8")  # noqa: SIM115
    base = Path.cwd() if requests == "-" else Path(requests).resolve().parent
    positions = _Positions(base, context)
    try:
        items = list(parse_items(source, positions))
    finally:
        if source is not sys.stdin:
            source.close()
    if width == 0:
        width = _auto_width(model, threads, len(items), quiet)
    engine = _engine(model, threads, width)
    show = not quiet and sys.stderr.isatty()
    try:
        with Journal(Path(output)) as journal:
            bar = click.progressbar(
                length=len(items), label="batch", file=sys.stderr, show_pos=True, show_eta=True
            )
            with bar if show else contextlib.nullcontext():
                last = [0]

                def progress(finished: int, _total: int) -> None:
                    if show:
                        bar.update(finished - last[0])
                        last[0] = finished

                summary = run_batch(engine, items, journal, width=width, on_progress=progress)
    finally:
        positions.close()
        engine.close()
    if as_json:
        click.echo(json.dumps(summary.as_dict(), indent=2))
    else:
        click.echo(
            f"{summary.done} completed, {summary.errors} errors, {summary.skipped} already done "
            f"({summary.items_per_s:.2f} requests/s, {summary.tokens_per_s:.1f} tokens/s) -> {output}",
            err=True,
        )
