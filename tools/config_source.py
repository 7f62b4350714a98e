"""Which config a command acts on, found the way users expect: `--config`, then `$EYAS_CONFIG`, then
`./eyas.toml`, then the embedded default. One place decides, so every command finds the same file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from eyas.tools.errors import ConfigError
from eyas.tools.recording.redact import remember_secrets
from eyas.tools.settings.config import EyasConfig, load_config, secret_values
from eyas.tools.settings.local_files import MISSING, not_a_regular_file
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget

ENV_VAR = "EYAS_CONFIG"
LOCAL_FILE = Path("eyas.toml")


@dataclass(frozen=True)
class ConfigSource:
    """Where a config comes from: a file, or (path None) the embedded target; `why` says how it was chosen."""

    path: Path | None
    why: str
    embedded: EmbeddedTarget | None = None

    def describe(self) -> str:
        """The one line a command prints, so the operator sees which target it acts on."""
        if self.path is None:
            return f"config: the embedded default ({SERVED_MODEL} on this machine; {self.why})"
        bare = not self.path.is_absolute() and self.path.parent == Path(".")
        return f"config: {'./' if bare else ''}{self.path} ({self.why})"

    def load(self) -> EyasConfig:
        """The config, its secret values remembered so every output of this process redacts them."""
        config = (
            load_config(self.path) if self.path is not None else (self.embedded or EmbeddedTarget.from_env()).config()
        )
        remember_secrets(secret_values(config))
        return config


def locate_config(flag: Path | None) -> ConfigSource:
    """The first of: the flag, $EYAS_CONFIG, ./eyas.toml, the embedded default. A file named by the flag or
    the variable must exist: silently falling back would act on another target than the one asked for."""
    if flag is not None:
        _must_exist(
            flag,
            f"--config names {flag}",
            f"Pass an existing config file, or drop --config to use ${ENV_VAR}, ./{LOCAL_FILE} or the embedded "
            "default, the first that is there.",
        )
        return ConfigSource(flag, "from --config")
    named = os.environ.get(ENV_VAR)
    if named:
        path = Path(named)
        _must_exist(
            path,
            f"${ENV_VAR} names {path}",
            f"Point ${ENV_VAR} at an existing config file, or unset it to use ./{LOCAL_FILE} or, without that, the "
            "embedded default.",
        )
        return ConfigSource(path, f"from ${ENV_VAR}")
    if LOCAL_FILE.is_file():
        return ConfigSource(LOCAL_FILE, "found in the current directory")
    return ConfigSource(None, f"no --config, ${ENV_VAR} or ./{LOCAL_FILE}", EmbeddedTarget.from_env())


def find_config(flag: Path | None) -> tuple[EyasConfig, ConfigSource]:
    """The config a command acts on, loaded, and where it came from."""
    source = locate_config(flag)
    return source.load(), source


def _must_exist(path: Path, named: str, fix: str) -> None:
    """One paragraph: what is wrong, how to fix it, and how to get a config to start from."""
    if path.is_dir():
        raise ConfigError(f"{named}, a directory, not a config file. {fix}")
    problem = not_a_regular_file(path)
    if problem == MISSING:
        raise ConfigError(
            f"{named}, which does not exist. {fix} `eyas config init {path}` writes an example config there to edit."
        )
    if problem is not None:  # a FIFO or /dev/zero would be read without end; a link loop is not "missing"
        raise ConfigError(f"{named}, which {problem}. {fix}")
