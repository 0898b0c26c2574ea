"""`fimble index`: build or update a workspace index, watch it, and look at what it knows."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

__all__ = ["index"]

_LOOKUPS = ("find_name", "outline_file", "imports_file", "search_text")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", required=False, default=".", type=click.Path(path_type=Path))
@click.option(
    "--watch", is_flag=True, help="After indexing, keep the index up to date as files change (Ctrl-C stops)."
)
@click.option("--stats", "show_stats", is_flag=True, help="Print what the index holds after updating it.")
@click.option(
    "--rebuild", is_flag=True, help="Drop the stored index of PATH and build it again from scratch."
)
@click.option(
    "--find", "find_name", metavar="NAME", help="Show where NAME (or Type.NAME) is defined; no indexing."
)
@click.option(
    "--outline", "outline_file", metavar="FILE", help="Show the signatures indexed for FILE; no indexing."
)
@click.option(
    "--imports", "imports_file", metavar="FILE", help="Show FILE's imports and what they resolve to."
)
@click.option("--search", "search_text", metavar="TEXT", help="Show the best BM25 text windows for TEXT.")
@click.option(
    "--exclude",
    multiple=True,
    metavar="PATTERN",
    help="Also skip paths matching this .gitignore-style pattern (repeatable).",
)
@click.option(
    "--max-file-kib",
    type=click.IntRange(1),
    default=1024,
    show_default=True,
    help="Skip files larger than this.",
)
@click.option(
    "--workers",
    type=click.IntRange(0, 64),
    default=2,
    show_default=True,
    help="Parser processes for big passes (0: none).",
)
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
def index(
    path: Path,
    watch: bool,
    show_stats: bool,
    rebuild: bool,
    find_name: str | None,
    outline_file: str | None,
    imports_file: str | None,
    search_text: str | None,
    exclude: tuple[str, ...],
    max_file_kib: int,
    workers: int,
    as_json: bool,
) -> None:
    """Index the code under PATH (default: the current folder) for cross-file completion context.

    Files are parsed with tree-sitter (Python, JavaScript, TypeScript, Go, Rust, Java, C, C++; other
    text is searchable only) into a store under fimble's cache folder. .gitignore rules are honoured;
    secrets (.env*, *.pem, *.key, id_rsa*, credentials*, ...) are never read. Re-running only parses
    what changed. --find, --outline, --imports and --search read the existing index without updating it.
    """
    from fimble.indexer import IndexConfig, WorkspaceIndex

    # A foreground job the user waits for: parse at normal priority (the server nices its workers).
    config = IndexConfig(max_file_bytes=max_file_kib * 1024, exclude=exclude, workers=workers, worker_nice=0)
    lookups = {
        name: value
        for name, value in zip(_LOOKUPS, (find_name, outline_file, imports_file, search_text), strict=True)
    }
    if any(v is not None for v in lookups.values()):
        if watch or rebuild:
            raise click.UsageError(
                "--find/--outline/--imports/--search only read the index; drop --watch/--rebuild"
            )
        with WorkspaceIndex.open(path, config, writable=False) as ix:
            _lookup(ix, lookups, as_json)
            if show_stats:
                _print_stats(ix.stats(), as_json)
        return
    with WorkspaceIndex.open(path, config) as ix:
        report = _run_pass(ix, rebuild)
        if as_json and not show_stats:
            click.echo(json.dumps(_asdict(report), indent=2))
        elif not as_json:
            _print_report(ix, report)
        if show_stats:
            _print_stats(ix.stats(), as_json)
        if watch:
            _watch(ix)


def _asdict(value: Any) -> Any:
    from dataclasses import asdict

    return asdict(value)


def _run_pass(ix: Any, rebuild: bool) -> Any:
    from tqdm import tqdm

    bar = tqdm(total=0, unit="file", desc="indexing", file=sys.stderr, disable=None, delay=0.5, leave=False)
    started = time.monotonic()

    def progress(p: Any) -> None:
        if bar.total != p.files_total:
            bar.total = p.files_total
        bar.n = p.files_done
        elapsed = max(time.monotonic() - started, 1e-6)
        mb, total_mb = p.bytes_done / 1e6, p.bytes_total / 1e6
        bar.set_postfix_str(f"{mb:.1f}/{total_mb:.1f} MB, {mb / elapsed:.1f} MB/s", refresh=False)
        bar.refresh()

    try:
        return ix.build(rebuild=rebuild, progress=progress)
    except KeyboardInterrupt:
        bar.close()
        ix.close()
        click.echo(
            "fimble: stopped; files indexed so far are kept, run `fimble index` again to finish", err=True
        )
        sys.exit(130)
    finally:
        bar.close()


def _print_report(ix: Any, r: Any) -> None:
    stats = ix.stats()
    skipped = []
    for label, count in (
        ("ignored", r.ignored),
        ("secrets", r.secrets),
        ("too large", r.too_large),
        ("unreadable/binary", r.skipped),
        ("symlink loops", r.loops),
    ):
        if count:
            skipped.append(f"{count} {label}")
    unchanged = r.unchanged + r.touched
    click.echo(
        f"indexed {r.scanned} files in {r.seconds:.1f} s: {r.parsed} parsed, {unchanged} unchanged, "
        f"{r.removed} removed" + (f"; skipped {', '.join(skipped)}" if skipped else "")
    )
    size_mb = stats.store_bytes / 1e6
    click.echo(
        f"{stats.definitions} definitions, {stats.blocks} text blocks; "
        f"store {size_mb:.1f} MB at {stats.store_path}"
    )


def _print_stats(stats: Any, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(_asdict(stats), indent=2))
        return
    rows = [
        ("root", stats.root),
        ("store", stats.store_path),
        ("ready", "yes" if stats.ready else "no (first pass not finished)"),
        (
            "files",
            f"{stats.files} ({stats.parsed_files} parsed, {stats.files - stats.parsed_files} text only)",
        ),
        ("definitions", stats.definitions),
        ("text blocks", stats.blocks),
        ("postings", f"{stats.segments} segment(s), {stats.stale_versions} stale file version(s)"),
        ("store size", f"{stats.store_bytes / 1e6:.1f} MB (map {stats.map_bytes >> 20} MiB)"),
        ("languages", ", ".join(f"{lang} {n}" for lang, n in stats.languages) or "-"),
    ]
    if stats.last_pass_at:
        rows.append(
            ("last full pass", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stats.last_pass_at)))
        )
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key.ljust(width)}  {value}")


def _lookup(ix: Any, lookups: dict[str, str | None], as_json: bool) -> None:
    if lookups["find_name"] is not None:
        found = ix.definitions(lookups["find_name"])
        if not found and not as_json:
            click.echo(f"no definition of {lookups['find_name']!r} in the index", err=True)
        _print_defs(found, as_json)
    if lookups["outline_file"] is not None:
        rel = ix.relpath(Path(lookups["outline_file"]).resolve()) or lookups["outline_file"]
        defs = ix.file_outline(rel)
        if not defs and not as_json:
            click.echo(f"the index has no definitions for {rel}", err=True)
        _print_defs(defs, as_json, with_path=False)
    if lookups["imports_file"] is not None:
        rel = ix.relpath(Path(lookups["imports_file"]).resolve()) or lookups["imports_file"]
        imports = ix.imports_of(rel)
        if as_json:
            click.echo(json.dumps([_asdict(i) for i in imports], indent=2))
        for imp in () if as_json else imports:
            names = f" ({', '.join(imp.names)})" if imp.names else ""
            target = ", ".join(imp.targets) if imp.targets else "(outside the workspace)"
            click.echo(f"{rel}:{imp.line + 1}: {imp.spec}{names} -> {target}")
    if lookups["search_text"] is not None:
        snippets = ix.search(lookups["search_text"], k=5)
        if as_json:
            click.echo(json.dumps([_asdict(s) for s in snippets], indent=2))
        for s in () if as_json else snippets:
            click.echo(f"{s.path}:{s.start_line + 1}-{s.end_line + 1}  (score {s.score:.2f})")
            for line in s.text.rstrip("\n").split("\n"):
                click.echo(f"    {line}")


def _print_defs(defs: Any, as_json: bool, *, with_path: bool = True) -> None:
    if as_json:
        click.echo(json.dumps([_asdict(d) for d in defs], indent=2))
        return
    for d in defs:
        where = f"{d.path}:{d.span.start_line + 1}" if with_path else f"{d.span.start_line + 1:>5}"
        indent = "  " * d.qualname.replace("::", ".").count(".") if not with_path else ""
        click.echo(f"{where}: {indent}{d.kind} {d.qualname}")
        for line in d.signature.split("\n"):
            click.echo(f"    {indent}{line}")
        if d.doc:
            click.echo(f"    {indent}# {d.doc}")


def _watch(ix: Any) -> None:
    stop = threading.Event()

    def _on_term(signum: int, frame: Any) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, _on_term)
    ix.start(watch=True, initial_pass=False)
    click.echo(f"watching {ix.root} for changes (Ctrl-C to stop)", err=True)
    shown: object = None
    try:
        while not stop.wait(1.0):
            err = ix.last_error
            if err is not None and err is not shown:
                click.echo(f"fimble: {err}", err=True)
            shown = err
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        ix.flush(timeout=5)
