"""`python -m fimble`: the same as the `fimble` command."""

from fimble.cli import main

main()
