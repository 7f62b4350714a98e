"""eyas's exit statuses, each with one meaning: a script branches on them, `eyas --help` lists them from here, and
each command whose statuses differ lists its own, so no help text keeps a second copy of a number."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    NO = 1
    USAGE = 2
    GATE = 3
    ROLLED_BACK = 4
    UNREACHABLE = 5
    NOT_FOUND = 6

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS = {
    ExitCode.OK: "done",
    ExitCode.NO: "a check or verdict said no (a failed check, a plan that does not fit, a run that stopped before its "
    "end: a refused drafter, a rejected or blocked phase, an aborted job; a replay that diverged, a broken hash chain, "
    "a restart not confirmed)",
    ExitCode.USAGE: "bad input: a bad flag, argument, config or policy, or another error said with its fix",
    ExitCode.GATE: "the run waits at a gate for an answer: `eyas approve RUN`, then `eyas resume RUN`",
    ExitCode.ROLLED_BACK: "the drafter was rolled back: production's own counters missed a threshold",
    ExitCode.UNREACHABLE: "a host could not be reached over SSH",
    ExitCode.NOT_FOUND: "no such run or transcript, or no drafter in the run yet",
}


def exit_codes_help(*codes: ExitCode) -> str:
    """The block of help that lists `codes` (default: all) with their meanings, kept as written by click (\\b)."""
    lines = [f"  {code.value}  {code.meaning}" for code in codes or tuple(ExitCode)]
    return "\b\nExit status:\n" + "\n".join(lines)
