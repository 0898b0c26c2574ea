"""`fimble doctor` (not implemented yet)."""

from __future__ import annotations

import click

__all__ = ["doctor"]


@click.command()
def doctor() -> None:
    """Not implemented yet."""
    raise click.ClickException("not implemented yet")
