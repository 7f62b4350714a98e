"""The checked field types the config's sections are made of: each refuses a value eyas cannot use with one sentence
that says what to write instead (a path on the host, a URL eyas can reach, a whole number, a finite time)."""

from __future__ import annotations

import posixpath
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field


def _absolute_posix(value: str) -> str:
    if not posixpath.isabs(value):
        raise ValueError(f"must be an absolute path on the host, got {value!r}")
    return value


URL_EXAMPLE = "write it like http://10.0.0.5:8000 or, for IPv6, http://[fd00::5]:8000"


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https://, got {value!r}")
    # Any '@' before the query, not only in the parsed netloc: a password holding '/' ends the netloc early.
    if "@" in value.split("://", 1)[1].partition("?")[0].partition("#")[0]:
        # httpx would turn them into Basic auth and silently drop the API key; and a URL is printed, recorded
        # and passed on command lines, where a password must never be.
        raise ValueError(
            "holds credentials (user:password@ or token@ before the host), which eyas refuses: remove them from "
            "the URL, and put the key in an environment variable named by api_key_env (sent as a Bearer token)"
        )
    try:
        parts = urlsplit(value)
        port = parts.port  # raises for a port that is not a number up to 65535
    except ValueError as exc:
        raise ValueError(f"is not a URL eyas can reach ({exc}), got {value!r}; {URL_EXAMPLE}") from None
    if not parts.hostname or port == 0:
        raise ValueError(f"names no host and port eyas can reach, got {value!r}; {URL_EXAMPLE}")
    return value.rstrip("/")


def _not_bool(value: object) -> object:
    """TOML's true and false are ints to pydantic's lax mode (true is port 1); a count is written as a number."""
    if isinstance(value, bool):
        raise ValueError(f"is {str(value).lower()}, a boolean, not a number; write a whole number without quotes")
    return value


def _named(value: str) -> str:
    if not value.strip():
        raise ValueError(f"is empty ({value!r}); name the served model as the server's /v1/models lists it")
    return value


AbsolutePath = Annotated[str, AfterValidator(_absolute_posix)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
ModelName = Annotated[str, AfterValidator(_named)]
# A port or a count: a whole number as TOML writes one; strict, so neither `true` nor "22" is taken for one.
WholeNumber = Annotated[int, BeforeValidator(_not_bool), Field(strict=True)]
# A time in seconds: a finite number (TOML's inf and nan parse as floats, and an endless deadline hangs a run).
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
