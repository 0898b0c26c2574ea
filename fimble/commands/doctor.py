"""`fimble doctor`: print the machine and model checks; exit 1 if something blocks serving.

The checks themselves live in ``fimble.models.doctor``; this module only prints them.
"""

from __future__ import annotations

import json

import click

__all__ = ["doctor"]

_LABELS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


@click.command()
@click.option(
    "--model", "-m", default=None, help="Model name or .gguf path to check (default: the default model)."
)
@click.option(
    "--ctx", "n_ctx", default=4096, show_default=True, help="Context size for the KV-cache estimate."
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(model: str | None, n_ctx: int, as_json: bool) -> None:
    """Check CPU, memory, disk, llama.cpp and the model; every problem comes with its fix."""
    from fimble.models.doctor import has_blocker, run_checks

    results = run_checks(model, n_ctx=n_ctx)
    blocked = has_blocker(results)
    if as_json:
        click.echo(json.dumps({"ok": not blocked, "checks": [r.to_json() for r in results]}, indent=2))
    else:
        width = max(len(r.name) for r in results)
        for r in results:
            click.echo(f"{_LABELS[r.status]}  {r.name.ljust(width)}  {r.summary}")
            if r.fix and r.status in ("fail", "warn"):
                click.echo(f"{'':4}  {'':{width}}  fix: {r.fix}")
        click.echo(
            "\nfimble cannot serve completions until the FAIL lines are fixed."
            if blocked
            else "\nready: `fimble complete FILE:LINE:COL` or start the language server."
        )
    if blocked:
        raise SystemExit(1)
