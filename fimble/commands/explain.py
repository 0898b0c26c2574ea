"""`fimble explain PATH:LINE:COL`: what went into a completion and what it cost."""

from __future__ import annotations

from typing import Any

import click

from fimble.commands.complete import completion_options, outcome_json, run_at, timings_line

__all__ = ["explain"]


@click.command()
@completion_options
def explain(location: str, as_json: bool, **options: Any) -> None:
    """Show the prompt's parts (with why each is there and its tokens), the KV reuse, the timings, the
    stop reason and the suggestion for the code at PATH:LINE:COL.

    Example: fimble explain src/app.py:42:17
    """
    out = run_at(location, **options)
    if as_json:
        click.echo(outcome_json(out))
        return
    result, engine = out.result, out.engine
    click.echo(f"{location}  model {engine.model_path.name} ({engine.fim.family})")
    click.echo(f"prompt: {sum(p.tokens for p in result.parts)} tokens")
    for part in result.parts:
        where = f"{part.path}  " if part.path else ""
        click.echo(f"  {part.kind:<8} {part.tokens:>6}  {where}{part.reason}")
    if out.note:
        click.echo(f"note: {out.note}")
    click.echo(timings_line(out))
    click.echo("suggestion (" + ("multi-line" if result.multiline else "single line") + "):")
    click.echo(click.style(result.text or "(none)", fg="green"))
