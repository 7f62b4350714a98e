"""Secrets never reach a transcript, a terminal, a state file or a report: configured secret values, common
secret shapes and detect-secrets' token detectors are replaced first.

Redaction is deterministic and idempotent, so a replay can redact a live request the same way and compare.
Base64 blobs (job scripts travel base64-encoded inside commands) are decoded, redacted and re-encoded.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Iterable
from typing import Any

MARK = "[REDACTED]"


def _mark(what: str) -> str:
    return f"[REDACTED:{what}]"


# A name that holds a secret: it ends with one of these words (so max_tokens, tokenizer, pad_token_id do not, nor
# a rate such as bytes_per_token), or has a part that only credentials have (DB_CREDENTIALS_FILE, GPG_PASSPHRASE,
# BASIC_AUTH, OAUTH_CLIENT, MY_SECRET_THING, DB_PASSWORD_V2; not `secrets`, a list of names in eyas's own JSON).
_SECRET_NAME = (
    r"(?:(?:[A-Za-z0-9]+[_.-])*(?<!eos_)(?<!bos_)(?<!pad_)(?<!unk_)(?<!sep_)(?<!cls_)(?<!mask_)(?<!per_)"
    r"(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|token|secret|password|passwd|pwd|pass)"
    r"|(?:[A-Za-z0-9]+[_.-])+key"  # AZURE_OPENAI_KEY, SSH_KEY (a bare `key` is a URL query's, below)
    r"|(?:[A-Za-z0-9]+[_.-])*(?:credentials?|passphrase|o?auth[nz]?|authentication|secret|password|passwd)"
    r"(?:[_.-][A-Za-z0-9]+)*)"
    # A name that ends in _env, _file, _path or _name holds where a secret is, not the secret: a fix message
    # that says `key_passphrase_env = "SSH_KEY_PASS"` keeps its words.
    r"(?<![_.-]env)(?<![_.-]file)(?<![_.-]path)(?<![_.-]name)(?![A-Za-z0-9_])"
)
_FRESH = r"(?!\[REDACTED)(?!\$)"  # not already redacted, not a shell variable reference


def _name_value(match: re.Match[str]) -> str:
    """NAME=value or NAME: value, the value hidden; but `--api-key: eyas's own servers...` names a flag in prose
    (a flag takes its value after `=` or a space, never a colon), and `VLLM_API_KEY: eyas's own servers` is prose
    too (a possessive after a colon), so their words stay."""
    name, separator, quote = match.groups()
    quoted = quote or '"' in separator or "'" in separator  # `"--api-key": "..."` is JSON, not prose
    flag = match.string[max(match.start() - 1, 0) : match.start()] == "-"
    possessive = re.match(r"'s\s", match.string[match.end() : match.end() + 3]) is not None
    if ":" in separator and not quoted and (flag or possessive or _counted(match)):
        return match.group(0)
    return f"{name}{separator}{quote}{MARK}"


# `GFLOP a token: 2 per active parameter`: "token" is also the unit every figure of an LLM counts in. After an
# article, with a number then more words, it is a figure in a sentence; a config's `token: 2` has no article before
# it, and a secret is not a bare number followed by words. (Only "token": a password or a secret is never a unit.)
_ARTICLE_BEFORE = re.compile(r"(?:^|\s)(?:a|an|the|per|each|one)\s+$", re.IGNORECASE)
_FIGURE_THEN_WORDS = re.compile(r"[0-9]+(?:\.[0-9]+)?\s+[a-z]")


def _counted(match: re.Match[str]) -> bool:
    """Whether `NAME: value` is a count in a sentence (see _ARTICLE_BEFORE), not a setting."""
    name = match.group(1)
    before = match.string[max(match.start() - 8, 0) : match.start()]
    after = match.string[match.end() - len(match.group(0)) + len("".join(match.groups())) :]
    return name.lower() == "token" and bool(_ARTICLE_BEFORE.search(before)) and bool(_FIGURE_THEN_WORDS.match(after))


_PATTERNS: list[tuple[re.Pattern[str], Any]] = [
    (
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)", re.DOTALL),
        _mark("private-key"),
    ),
    (
        re.compile(
            r"""(?i)(authorization["']?\s*[:=]\s*["']?)((?:basic|bearer|token|digest)\s+)?"""
            r"(?!(?:basic|bearer|token|digest)\s)" + _FRESH + r"""[^\s"',]+"""
        ),
        r"\1\2" + MARK,
    ),
    (re.compile(r"(?i)\b(bearer\s+)" + _FRESH + r"[A-Za-z0-9._~+/=-]{8,}"), r"\1" + MARK),
    # NAME=value, NAME: value, "name": "value" (the name and quotes stay, so a reader sees what was there).
    (
        re.compile(
            r"""(?i)(?<![A-Za-z0-9_])("""
            + _SECRET_NAME
            + r""")(["']?\s*[=:]\s*)(["']?)"""
            + _FRESH
            + r"""[^\s"'&;,]+"""
        ),
        _name_value,
    ),
    # --name value
    (re.compile(r"""(?i)(--""" + _SECRET_NAME + r""")(\s+)(["']?)""" + _FRESH + r"""[^\s"']+"""), r"\1\2\3" + MARK),
    # curl -u user:password (-U, --user, --proxy-user): the password, in curl's arguments only (`date -u +%H:%M`
    # and `docker -u 0:0` are not credentials).
    (
        re.compile(
            r"""(\bcurl\s[^\n;|&]*?(?<=\s)(?:-u|-U|--user|--proxy-user)(?:\s+|=)?["']?[^\s:"']+:)"""
            + _FRESH
            + r"""[^\s"']+"""
        ),
        r"\1" + MARK,
    ),
    # mysql -pPASSWORD (and mysqldump, mariadb...): the password attached to -p, in those commands only, where -p
    # is not a port or a `mkdir -p`.
    (
        re.compile(
            r"""(\b(?:mysql|mariadb)[\w-]*\s[^\n;|&]*?(?<=\s)-p)"""
            r"""(?:"(?!\$)[^"]+"|'(?!\$)[^']+'|""" + _FRESH + r"""[^\s"']+)"""
        ),
        r"\1" + MARK,
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), _mark("openai-key")),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), _mark("hf-token")),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"), _mark("github-token")),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), _mark("aws-key")),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), _mark("slack-token")),
    (re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+"), _mark("slack-webhook")),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), _mark("jwt")),
    (
        re.compile(r"""(?i)(?<![A-Za-z0-9_-])((?:set-)?cookie["']?\s*:\s*+["']?)""" + _FRESH + r"""[^\r\n"']+"""),
        r"\1" + MARK,
    ),
    # user:password@host, the password up to the last '@' before the host (passwords may hold '/' and '@').
    (
        re.compile(r"""(://[^/\s:@"']+:)""" + _FRESH + r"""[^\s"'?#]+@(?=[A-Za-z0-9.\[\]-]+(?:[:/?#\s"'),]|$))"""),
        r"\1" + MARK + "@",
    ),
    (re.compile(r"""(https?://)""" + _FRESH + r"""[^/\s:@"']+@"""), r"\1" + MARK + "@"),  # https://TOKEN@host
]
# A URL's query parameter that carries a credential: ?key=, &token=, a presigned URL's X-Amz-Signature,
# X-Amz-Credential and X-Amz-Security-Token, a SAS `sig=`.
_URL_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:[A-Za-z0-9_.-]*[_.-])?(?:key|token|signature|sig|secret|password|credential|auth)=)"
    + _FRESH
    + r"""[^&\s"'#<>]+"""
)
_PATTERNS.append((_URL_QUERY_SECRET, r"\1" + MARK))

# Environment variables known to hold no secret: the settings of CUDA, NCCL, vLLM, torch, Python and the shell
# that a production unit sets. Every other Environment= value of a unit is treated as a secret (an AZURE_OPENAI_KEY,
# a presigned URL: names do not always say), unless its value is an obviously plain setting.
HARMLESS_ENV_PREFIXES = (
    "CUDA_", "NCCL_", "VLLM_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "OMP_", "MKL_", "KMP_", "GLOO_", "NVIDIA_",
    "HF_HUB_", "TRANSFORMERS_", "TOKENIZERS_", "PYTHON", "LC_", "XDG_", "RAY_", "TRITON_", "NUMEXPR_", "OPENBLAS_",
)  # fmt: skip
HARMLESS_ENV = {
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TZ",
    "TERM",
    "SHELL",
    "LD_LIBRARY_PATH",
    "HF_HOME",
    "HF_ENDPOINT",
    "TMPDIR",
}
_PLAIN_SETTING = re.compile(r"^(?:[0-9][0-9.,:-]*|true|false|yes|no|on|off|none|auto)$", re.IGNORECASE)


def harmless_env(name: str, value: str) -> bool:
    """Whether an environment variable may be shown as it is (else it is treated as a secret)."""
    if Redactor().finds_secret(f"{name}={value}"):
        return False
    known = name in HARMLESS_ENV or name.startswith(HARMLESS_ENV_PREFIXES)
    return known or bool(_PLAIN_SETTING.match(value))


def shown_env(env: dict[str, str]) -> dict[str, str]:
    """An environment as it may be shown: each value that is not known harmless replaced by the mark."""
    return {name: value if harmless_env(name, value) else MARK for name, value in env.items()}


# A unit's `Environment=A=1 "B=two words"` line, as `systemctl cat` or the unit file has it, wherever it is quoted.
_ENVIRONMENT_LINE = re.compile(r"(?<![\w])(Environment=)([^\n]*)")  # in a file, a log line or JSON
_ASSIGNMENT = re.compile(r"""(")([A-Za-z_]\w*)=([^"]*)"|(')([A-Za-z_]\w*)=([^']*)'|()([A-Za-z_]\w*)=([^\s"'\\]*)""")


def _environment_line(match: re.Match[str]) -> str:
    def value(assignment: re.Match[str]) -> str:
        quote, name, found = (part for part in assignment.groups() if part is not None)
        if not found or found.startswith("[REDACTED") or harmless_env(name, found):
            return assignment.group(0)
        return f"{quote}{name}={MARK}{quote}"

    return match.group(1) + _ASSIGNMENT.sub(value, match.group(2))


# `--api-key VALUE` as two words of an argv list.
_SECRET_FLAG = re.compile(r"(?i)^--" + _SECRET_NAME + "$")

# Header and field names whose whole value is a secret, whatever it looks like.
_SECRET_KEY = re.compile(
    r"(?i)^(?:authorization|proxy-authorization|cookie|set-cookie|x-api-key|" + _SECRET_NAME + ")$"
)
_BASE64_BLOB = re.compile(
    r"(?<![A-Za-z0-9+/=])(?:[A-Za-z0-9+/]{4}){6,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?![A-Za-z0-9+/=])"
)


_remembered: set[str] = set()


def remember_secrets(values: Iterable[str]) -> None:
    """Secret values this process loaded (the config's keys): every Redactor made afterwards replaces them,
    so outputs that never see the config (the terminal, state files) redact them too."""
    _remembered.update(value for value in values if value)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _delimited(kind: str) -> Any:
    """A replacement that keeps the separators some detector patterns match around the secret."""

    def replace(match: re.Match[str]) -> str:
        found = match.group(0)
        core = found.strip(" \t=:\"'")
        if not core:
            return found
        start = found.index(core)
        return found[:start] + _mark(kind) + found[start + len(core) :]

    return replace


# Detectors left out: entropy and keyword guesses (they flag hashes and prose), public IPs (not secrets), and
# those the patterns above already handle better (private keys and URL passwords, whole).
_SKIPPED_DETECTORS = {
    "Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector",
    "PrivateKeyDetector", "BasicAuthDetector",
}  # fmt: skip


@functools.cache
def _detectors() -> tuple[tuple[re.Pattern[str], Any], ...]:
    """detect-secrets' token patterns: a second net of well-kept shapes beside ours (imported on first use)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    found: list[tuple[re.Pattern[str], Any]] = []
    plugins: dict[str, type] = get_mapping_from_secret_type_to_class()
    for kind, plugin in plugins.items():
        if issubclass(plugin, RegexBasedDetector) and plugin.__name__ not in _SKIPPED_DETECTORS:
            # A class attribute on each detector (an abstract property on the base class).
            patterns: Iterable[re.Pattern[str]] = getattr(plugin, "denylist", ())
            found += [(pattern, _delimited(_slug(kind))) for pattern in patterns]
    return tuple(found)


class Redactor:
    """Replaces secrets in strings, and recursively in the strings of dicts and lists."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        values = {value for value in (*secrets, *_remembered) if value}
        self._secrets = sorted(values, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            value = value.replace(secret, _mark("secret"))
        for pattern, replacement in (*_PATTERNS, *_detectors()):
            value = pattern.sub(replacement, value)
        if "Environment=" in value:
            value = _ENVIRONMENT_LINE.sub(_environment_line, value)
        return _BASE64_BLOB.sub(self._blob, value) if len(value) >= 24 else value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self._field(key, item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return self._items(value)
        return value

    def finds_secret(self, value: str) -> bool:
        return self.text(value) != value

    def _items(self, items: list[Any] | tuple[Any, ...]) -> list[Any]:
        after_flag = [isinstance(item, str) and bool(_SECRET_FLAG.match(item)) for item in (None, *items)]
        return [
            MARK if flag and isinstance(item, str) and not item.startswith(("--", "[REDACTED")) else self.value(item)
            for flag, item in zip(after_flag, items, strict=False)
        ]

    def _field(self, key: Any, item: Any) -> Any:
        if isinstance(item, str) and item and isinstance(key, str) and _SECRET_KEY.match(key.lstrip("-")):
            return item if item.startswith("[REDACTED") else MARK
        return self.value(item)

    def _blob(self, match: re.Match[str]) -> str:
        blob = match.group(0)
        try:
            decoded = base64.b64decode(blob, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return blob
        cleaned = self.text(decoded)
        return blob if cleaned == decoded else base64.b64encode(cleaned.encode()).decode()
