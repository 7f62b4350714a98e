"""Errors that reach the operator: each names the problem and the fix in one readable paragraph."""


class EyasError(Exception):
    """Base of every error eyas reports to the operator (printed without a traceback)."""


class ConfigError(EyasError):
    """The configuration file is missing, malformed or inconsistent."""


class HostError(EyasError):
    """A host could not be reached or used."""


class HostUnreachable(HostError):
    pass


class HostKeyUnknown(HostError):
    pass


class AuthFailed(HostError):
    pass


class CommandTimeout(HostError):
    pass


class RemoteFileNotFound(HostError):
    pass


class JobError(EyasError):
    """A detached job could not be launched or controlled."""


class TargetError(EyasError):
    """The embedded target could not be prepared, provisioned or started."""
