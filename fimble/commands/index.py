"""`fimble index` (not implemented yet)."""

from __future__ import annotations

import click

__all__ = ["index"]


@click.command()
def index() -> None:
    """Not implemented yet."""
    raise click.ClickException("not implemented yet")
