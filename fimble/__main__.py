"""`python -m fimble`: the same CLI as the `fimble` script (test harnesses start the server this way)."""

from fimble.cli import main

main()
