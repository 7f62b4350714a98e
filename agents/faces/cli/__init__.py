"""The `eyas` command line and its terminal UI."""
