"""Keep credentials out of everything ckpt prints, tracebacks of ``--debug`` included.

Secrets come from four places: ``--storage-option`` values whose key names a secret, the
usual environment variables, passwords in URLs (``scheme://user:password@host``), and
secrets embedded in text (connection strings, SAS tokens in URLs). :func:`scrub` replaces
all of them with ``***``.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

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
    "AZURE_STORAGE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON",
)
_EMBEDDED = (
    re.compile(r"(AccountKey=)[^;\s'\"]+", re.I),
    re.compile(r"(SharedAccessSignature=)[^;\s'\"]+", re.I),
    re.compile(r"([?&]sig=)[^&\s'\"]+", re.I),
    re.compile(r"(aws_secret_access_key['\"]?\s*[:=]\s*['\"]?)[^\s'\",]+", re.I),
    # The password of user-info in any URL: scheme://user:PASSWORD@host
    re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:'\"]*:)[^\s/?#@'\"]+(?=@)"),
)
_KNOWN: set[str] = set()
# "user:password@" of URLs seen, masked wherever other libraries quote them without the
# scheme (botocore: 'Invalid bucket name "user:password@bucket"'), however short.
_USERINFO: dict[str, str] = {}
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def is_secret_option(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def remember(value: str) -> None:
    """Treat ``value`` as a secret from now on (short values would mask too much)."""
    if len(value) >= 6:
        _KNOWN.add(value)


def remember_urls(text: str) -> None:
    """Treat the passwords of URLs in ``text`` (``scheme://user:password@host``) as secrets."""
    for match in _URL.finditer(text):
        try:
            parts = urlsplit(match.group(0))
        except ValueError:
            continue
        netloc = parts.netloc
        if "@" not in netloc:
            continue
        userinfo = netloc.rsplit("@", 1)[0]
        user, sep, password = userinfo.partition(":")
        if not sep or not password:
            continue
        for u, p in {(user, password), (unquote(user), unquote(password))}:
            _USERINFO[f"{u}:{p}@"] = f"{u}:***@"
            remember(p)


def scrub(text: str) -> str:
    for value in sorted(_USERINFO, key=len, reverse=True):
        text = text.replace(value, _USERINFO[value])
    for value in sorted(_KNOWN | _env_secrets(), key=len, reverse=True):
        text = text.replace(value, "***")
    for pattern in _EMBEDDED:
        text = pattern.sub(r"\1***", text)
    return text


def _env_secrets() -> set[str]:
    return {v for name in _SECRET_ENV if len(v := os.environ.get(name, "")) >= 6}
