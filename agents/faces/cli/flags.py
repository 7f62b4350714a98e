"""The options many commands take (--config, --host, --json), declared without what they lead to: a command that
only reads a run (`eyas status`, `eyas runs`) takes --json without importing the config's models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="eyas TOML config (`eyas config init` writes one). Default: $EYAS_CONFIG, else ./eyas.toml, else the "
        "embedded target.",
    ),
]

JsonOption = Annotated[bool, typer.Option("--json", help="print the result as JSON, alone on stdout")]

HostOption = Annotated[str | None, typer.Option("--host", help="host name from [hosts]; default: the target's host")]
