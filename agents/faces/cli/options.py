"""What the commands share: the config the --config option finds, and the sizes' options, whose defaults and help
come from `Sizes` so that no command repeats (or contradicts) a number. The options themselves are in flags.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from eyas.agents.faces.cli.completion import choices_completer
from eyas.agents.faces.cli.console import notice
from eyas.tools.config_source import ConfigSource, find_config
from eyas.tools.settings.config import EyasConfig, format_validation_error
from eyas.tools.settings.sizes import DEFAULT_SIZES, DEMO, SIZE_CHOICES, Sizes, SizeValue, shown_size, starting_sizes


def use_config(flag: Path | None) -> tuple[EyasConfig, ConfigSource]:
    """The config a command acts on (see `find_config`) and where it came from, said in one line on stderr,
    so that --json output stays clean."""
    config, source = find_config(flag)
    notice(source.describe())
    return config, source


def announce(source: ConfigSource) -> EyasConfig:
    """A config whose source is already known (a run's, the demo's), said the same way, then loaded."""
    notice(source.describe())
    return source.load()


def size_option(name: str, *flags: str) -> Any:
    """A typer option for the size `name`, its help the field's description and both of its defaults (the
    parameter's own default is None: `starting_sizes` fills in the one that fits the target)."""
    field = Sizes.model_fields[name]
    default, demo = shown_size(getattr(DEFAULT_SIZES, name)), shown_size(getattr(DEMO, name))
    defaults = f"default {default}; {demo} on the embedded default"
    choices = SIZE_CHOICES.get(name)
    completer = choices_completer(choices) if choices else None
    return typer.Option(*flags, help=f"{field.description} ({defaults})", show_default=False, autocompletion=completer)


def chosen_sizes(embedded: bool, **chosen: SizeValue | None) -> Sizes:
    """The run's sizes from its flags (`starting_sizes`); a size out of its bounds is a bad flag, said in words."""
    try:
        return starting_sizes(embedded, **chosen)
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(format_validation_error(exc))) from None


def positive_seconds(value: float | None) -> float | None:
    """A typer callback for a time in seconds (e.g. --poll-interval): finite and above 0. Typer's min= would let
    nan through (no comparison holds for it), and a run that polls every -1 or inf seconds spins or never polls."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"is {value:g} seconds; give a number of seconds above 0, e.g. 10")
    return value


def demo_size_option(name: str, *flags: str) -> Any:
    """A size option of `eyas demo`, whose default is the demo preset's (shown by typer)."""
    return typer.Option(*flags, help=Sizes.model_fields[name].description)
