"""`fimble complete` (not implemented yet)."""

from __future__ import annotations

import click

__all__ = ["complete"]


@click.command()
def complete() -> None:
    """Not implemented yet."""
    raise click.ClickException("not implemented yet")
