"""Keep credentials out of everything ckpt prints, tracebacks of ``--debug`` included.

Secrets come from three places: ``--storage-option`` values whose key names a secret, the
usual environment variables, and secrets embedded in text (connection strings, SAS tokens
in URLs). :func:`scrub` replaces all of them with ``***``.
"""

from __future__ import annotations

import os
import re

_SECRET_KEY = re.compile(
    r"(key|secret|token|password|passwd|sas|credential|connection_string|signature)", re.I
)
_SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON",
)
_EMBEDDED = (
    re.compile(r"(AccountKey=)[^;\s'\"]+", re.I),
    re.compile(r"(SharedAccessSignature=)[^;\s'\"]+", re.I),
    re.compile(r"([?&]sig=)[^&\s'\"]+", re.I),
    re.compile(r"(aws_secret_access_key['\"]?\s*[:=]\s*['\"]?)[^\s'\",]+", re.I),
)
_KNOWN: set[str] = set()


def is_secret_option(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def remember(value: str) -> None:
    """Treat ``value`` as a secret from now on (short values would mask too much)."""
    if len(value) >= 6:
        _KNOWN.add(value)


def scrub(text: str) -> str:
    for value in sorted(_KNOWN | _env_secrets(), key=len, reverse=True):
        text = text.replace(value, "***")
    for pattern in _EMBEDDED:
        text = pattern.sub(r"\1***", text)
    return text


def _env_secrets() -> set[str]:
    return {v for name in _SECRET_ENV if len(v := os.environ.get(name, "")) >= 6}
