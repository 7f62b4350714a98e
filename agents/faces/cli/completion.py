"""Shell completion (`eyas --install-completion`): the run ids in the runs folder wherever a command takes a run,
and the choices a size takes (--prompts, --extraction-mode, --extraction-backend)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import typer

from eyas.tools.errors import EyasError


def complete_run_id(incomplete: str) -> list[str]:
    """The runs whose id starts with what was typed, newest first (ids begin with their start time); none where
    the runs folder cannot be read (completion must never print an error into the shell's line). The runs module
    is imported here, not at the top: every command's --help imports this module, and needs none of it."""
    from eyas.graph.runs import list_runs

    try:
        ids = [run.run_id for run in list_runs()]
    except (EyasError, OSError):
        return []
    return sorted((run_id for run_id in ids if run_id.startswith(incomplete)), reverse=True)


def choices_completer(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """A completer offering the `choices` that start with what was typed."""

    def complete(incomplete: str) -> list[str]:
        return [choice for choice in choices if choice.startswith(incomplete)]

    return complete


def run_argument(help_text: str) -> Any:
    """A command's RUN argument, completed with the run ids."""
    return typer.Argument(help=help_text, autocompletion=complete_run_id)
