"""`fimble models` (not implemented yet)."""

from __future__ import annotations

import click

__all__ = ["models"]


@click.command()
def models() -> None:
    """Not implemented yet."""
    raise click.ClickException("not implemented yet")
