"""Secrets never reach a transcript: configured secret values and common secret shapes are replaced first.

Redaction is deterministic and idempotent, so a replay can redact a live request the same way and compare.
Base64 blobs (job scripts travel base64-encoded inside commands) are decoded, redacted and re-encoded.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Any

from eyas.tools.config import EyasConfig, secret_values

MARK = "[REDACTED]"


def _mark(what: str) -> str:
    return f"[REDACTED:{what}]"


# A name that holds a secret: it ends with one of these words (so max_tokens, tokenizer, pad_token_id do not).
_SECRET_NAME = (
    r"(?:[A-Za-z0-9]+[_.-])*(?<!eos_)(?<!bos_)(?<!pad_)(?<!unk_)(?<!sep_)(?<!cls_)(?<!mask_)"
    r"(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|token|secret|password|passwd|pwd)"
    r"(?![A-Za-z0-9_])"
)
_FRESH = r"(?!\[REDACTED)(?!\$)"  # not already redacted, not a shell variable reference

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
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
        r"\1\2\3" + MARK,
    ),
    # --name value
    (re.compile(r"""(?i)(--""" + _SECRET_NAME + r""")(\s+)(["']?)""" + _FRESH + r"""[^\s"']+"""), r"\1\2\3" + MARK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), _mark("openai-key")),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), _mark("hf-token")),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"), _mark("github-token")),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), _mark("aws-key")),
    (re.compile(r"(://[^/\s:@]+:)" + _FRESH + r"[^/\s@]+@"), r"\1" + MARK + "@"),
]
# Header and field names whose whole value is a secret, whatever it looks like.
_SECRET_KEY = re.compile(
    r"(?i)^(?:authorization|proxy-authorization|cookie|set-cookie|x-api-key|" + _SECRET_NAME + ")$"
)
_BASE64_BLOB = re.compile(
    r"(?<![A-Za-z0-9+/=])(?:[A-Za-z0-9+/]{4}){6,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?![A-Za-z0-9+/=])"
)


class Redactor:
    """Replaces secrets in strings, and recursively in the strings of dicts and lists."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({value for value in secrets if value}, key=len, reverse=True)

    @classmethod
    def from_config(cls, config: EyasConfig) -> Redactor:
        return cls(secret_values(config))

    def text(self, value: str) -> str:
        for secret in self._secrets:
            value = value.replace(secret, _mark("secret"))
        for pattern, replacement in _PATTERNS:
            value = pattern.sub(replacement, value)
        return _BASE64_BLOB.sub(self._blob, value) if len(value) >= 24 else value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self._field(key, item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value

    def finds_secret(self, value: str) -> bool:
        return self.text(value) != value

    def _field(self, key: Any, item: Any) -> Any:
        if isinstance(item, str) and item and isinstance(key, str) and _SECRET_KEY.match(key):
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
