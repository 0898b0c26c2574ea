"""`fimble explain PATH:LINE:COL`: what went into a completion and what it cost."""

from __future__ import annotations

from typing import Any

import click

from fimble.commands.complete import completion_options, outcome_json, run_at

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
    from fimble.completion.report import explanation_lines

    *parts, timings, shape = explanation_lines(result)
    for line in parts:
        click.echo(line)
    if out.note:
        click.echo(f"note: {out.note}")
    click.echo(timings)
    click.echo(shape)
    click.echo("suggestion:")
    click.echo(click.style(result.text or "(none)", fg="green"))
