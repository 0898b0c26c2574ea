"""The ``fimble`` command: a click group whose subcommands live in ``fimble.commands``.

Each subcommand module owns one verb; this module only wires them up and turns a
``FimbleError`` into one line on stderr and exit code 1 (no traceback for user errors).
"""

from __future__ import annotations

import logging
import sys

import click

from fimble import __version__
from fimble.commands import COMMANDS
from fimble.errors import FimbleError

__all__ = ["main"]


class _Group(click.Group):
    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except FimbleError as err:
            click.echo(f"fimble: {err}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fimble")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
def cli(verbose: int) -> None:
    """fimble: offline code completion on a CPU."""
    level = logging.WARNING - 10 * min(verbose, 2)
    fmt = "%(asctime)s %(name)s %(levelname)s %(message)s"
    logging.basicConfig(level=level, stream=sys.stderr, format=fmt)


for _command in COMMANDS:
    cli.add_command(_command)


def main() -> None:
    cli()
