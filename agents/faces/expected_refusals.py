"""Which failed probes of a transcript a server restart explains, so `eyas show` does not count them as errors.

A restarting vLLM refuses connections and answers /health with errors until its engine is up, and eyas probes it
all the while (the deep health check after a deploy, a rollback, a phase that had production stopped). The
transcript marks none of these as expected, so they are told apart here, from the events alone:
- a restart window opens at a service action: `systemctl stop|start|restart ...`, or a command that starts
  (`setsid`) or signals (`kill`) the stand-in's job (tools/service/standin.py, job id `target-server-PORT`);
- it closes at the next probe that a server answered with HTTP 200;
- a probe (a TCP connect, or a request to /health or /v1/models) that failed inside a window is expected.
A refusal outside any window (a server that was never restarted, or died) is still an error.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import TypeGuard
from urllib.parse import urlsplit

from eyas.tools.recording.transcript import CommandEvent, Event, HttpEvent, JobLaunchEvent, TcpEvent
from eyas.tools.service.choose import STANDIN_JOB_PREFIX

RESTARTING_VERBS = frozenset({"stop", "start", "restart", "try-restart", "reload-or-restart", "kill"})
PROBED_PATHS = ("/health", "/v1/models")  # what the health check asks before a completion (tools/checks/health.py)
STANDIN_ACTIONS = frozenset({"setsid", "kill"})  # the stand-in's job started (Jobs.launch) or stopped (Jobs.cancel)


def expected_refusals(events: Iterable[Event]) -> set[int]:
    """The seq of every failed probe inside a restart window, in the transcript's order."""
    restarting = False
    expected: set[int] = set()
    for event in events:
        if service_action(event):
            restarting = True
        elif is_probe(event):
            if event.error is not None and restarting:
                expected.add(event.seq)
            elif isinstance(event, HttpEvent) and event.error is None and event.status == 200:
                restarting = False
    return expected


def service_action(event: Event) -> bool:
    """A stop, start or restart of a service: systemd's, or the stand-in's job."""
    if isinstance(event, JobLaunchEvent):
        return event.job_id.startswith(STANDIN_JOB_PREFIX)
    if not isinstance(event, CommandEvent):
        return False
    words = _words(event.command)
    for index, word in enumerate(words):
        if PurePosixPath(word).name == "systemctl":
            verb = next((later for later in words[index + 1 :] if not later.startswith("-")), "")
            if verb in RESTARTING_VERBS:
                return True
    return bool(STANDIN_ACTIONS & set(words)) and any(STANDIN_JOB_PREFIX in word for word in words)


def is_probe(event: Event) -> TypeGuard[TcpEvent | HttpEvent]:
    """A TCP connect, or a request to a server's /health or /v1/models."""
    if isinstance(event, TcpEvent):
        return True
    return isinstance(event, HttpEvent) and urlsplit(event.url).path.rstrip("/").endswith(PROBED_PATHS)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # unbalanced quotes: a command as the host saw it, read word by word
        return command.split()
