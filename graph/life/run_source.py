"""Where a run's config comes from, as its run.json recorded it: opening the run (session.py) and what only reads
it (`eyas status`'s jobs, publish, deploy) load the same config without the session's imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eyas.tools.config_source import ConfigSource
from eyas.tools.target.embedded import EmbeddedTarget


def run_source(meta: dict[str, Any]) -> ConfigSource:
    """The config the run was created with, wherever it is resumed from."""
    why = "recorded when the run started"
    if meta["config"]:
        return ConfigSource(Path(meta["config"]), why)
    embedded = meta["embedded"]
    return ConfigSource(None, why, EmbeddedTarget(Path(embedded["cache_dir"]), port=embedded["port"]))
