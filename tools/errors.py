"""Errors that reach the operator: each names the problem and the fix in one readable paragraph, and carries the
status `eyas` exits with (tools/exit_codes.py)."""

from typing import ClassVar

from eyas.tools.exit_codes import ExitCode


class EyasError(Exception):
    """Base of every error eyas reports to the operator (printed without a traceback)."""

    exit_code: ClassVar[ExitCode] = ExitCode.USAGE


class ConfigError(EyasError):
    """The configuration file is missing, malformed or inconsistent."""


class HostError(EyasError):
    """A host could not be reached or used."""


class HostUnreachable(HostError):
    exit_code = ExitCode.UNREACHABLE


class HostKeyUnknown(HostError):
    pass


class AuthFailed(HostError):
    pass


class CommandTimeout(HostError):
    pass


class RemoteFileNotFound(HostError):
    pass


class NotFound(EyasError):
    """What the command was asked to act on (a run, a transcript) is not there."""

    exit_code = ExitCode.NOT_FOUND


class JobError(EyasError):
    """A detached job could not be launched or controlled."""


class TargetError(EyasError):
    """The embedded target could not be prepared, provisioned or started."""


class HttpError(Exception):
    """No HTTP answer at all: refused, timed out, reset. Here, not beside the HTTP client, so that reading a
    transcript (which re-raises it on replay) does not load the client."""
