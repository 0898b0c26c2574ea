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
@click.option(
    "--reprobe", is_flag=True, help="Probe the CPU path again instead of trusting the remembered verdict."
)
def doctor(model: str | None, n_ctx: int, as_json: bool, reprobe: bool) -> None:
    """Check CPU, memory, disk, llama.cpp and the model; every problem comes with its fix."""
    from fimble.models.doctor import has_blocker, run_checks

    def on_probe(path: str) -> None:
        click.echo(f"probing how llama.cpp runs on this CPU: the {path} path (once) ...", err=True)

    results = run_checks(model, n_ctx=n_ctx, on_probe=on_probe, reprobe=reprobe)
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
