"""`python -m eyas`: the same command line as the `eyas` script, for the interpreter that runs it."""

from eyas.agents.faces.cli.entry import main

main()
