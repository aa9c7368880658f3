"""Checkpoint URLs as fsspec takes them: scheme aliases, the extra a scheme needs, storage
options checked and turned into constructor arguments, and URLs made safe to show."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ckpt_cli import secrets
from ckpt_cli.errors import CkptError, StorageAccessError

# Spark users write s3a:// (Hadoop's connector); fsspec's s3fs serves it as s3.
SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "az": "abfs", "adl": "abfs"}
# Which optional extra provides which scheme, for the "missing extra" message.
SCHEME_EXTRAS = {"s3": "s3", "abfs": "azure", "gs": "gcs", "gcs": "gcs", "hdfs": "hdfs"}
# The module each of those extras brings (hdfs:// is pyarrow's, checked as it is opened).
BACKENDS = {"s3": "s3fs", "abfs": "adlfs", "gs": "gcsfs", "gcs": "gcsfs"}
# fsspec serves hdfs:// with pyarrow's HadoopFileSystem, which loads libhdfs and a JVM at
# run time: pyarrow alone is not enough.
HDFS_NEEDS = (
    "libhdfs and a JVM: set JAVA_HOME, HADOOP_HOME (or ARROW_LIBHDFS_DIR, the directory of "
    "libhdfs.so) and CLASSPATH=$(hadoop classpath --glob)"
)

# Bounded waiting on S3: botocore's defaults wait 60 s per attempt on a silent endpoint.
S3_DEFAULTS = {"connect_timeout": 10, "read_timeout": 60, "max_attempts": 3}


def redact_url(url: str) -> str:
    """Drop credentials and query strings (SAS tokens) from a URL before it is shown."""
    parts = urlsplit(url)
    if not parts.scheme or len(parts.scheme) == 1:  # a plain path, or a Windows drive
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    if "@" in parts.netloc and parts.scheme in ("abfs", "abfss", "az"):
        netloc = parts.netloc  # container@account is not a credential
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def normalise_url(url: str) -> tuple[str, str]:
    """Return (scheme, url with fsspec's scheme name); a plain path is ``file``."""
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+)://", url)
    if not match:
        return "file", url
    scheme = match.group(1).lower()
    canonical = SCHEME_ALIASES.get(scheme, scheme)
    if canonical != scheme:
        url = canonical + url[len(scheme) :]
    return canonical, url


N = TypeVar("N", int, float)


def number_option(key: str, value: Any, kind: type[N]) -> N:
    """A storage option that must be a number (``-S read_timeout=5`` arrives as 5 or "5")."""
    try:
        if isinstance(value, bool):
            raise ValueError
        return kind(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise CkptError(f"storage option {key}: expected {what}, found {value!r}") from None


def _s3_options(options: dict[str, Any]) -> dict[str, Any]:
    """``connect_timeout``, ``read_timeout`` and ``max_attempts`` as plain storage options
    (``-S read_timeout=5``), with bounded defaults, moved into botocore's config."""
    options = dict(options)
    config = dict(options.pop("config_kwargs", None) or {})
    for key, default in S3_DEFAULTS.items():
        value = options.pop(key, default)
        if key == "max_attempts":
            attempts = number_option(key, value, int)
            config.setdefault("retries", {"max_attempts": attempts, "mode": "standard"})
        else:
            config.setdefault(key, number_option(key, value, float))
    options["config_kwargs"] = config
    return options


def _check_mapping_options(options: Mapping[str, Any]) -> None:
    """``*_kwargs`` options are keyword arguments for a client: a string there (JSON text
    not parsed) would fail deep inside the store's library, or be ignored."""
    for key, value in options.items():
        if key.endswith("_kwargs") and value is not None and not isinstance(value, Mapping):
            raise CkptError(
                f"storage option {key}: expected a mapping of keyword arguments, "
                f"found {type(value).__name__}"
            )


def fsspec_options(url: str, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``storage_options`` as fsspec's constructors for ``url`` take them: ckpt's own S3
    options (``read_timeout``...) moved into botocore's config, ``retries`` dropped (not an
    s3fs argument). For every filesystem ckpt opens, output and manifests included."""
    secrets.remember_urls(url)  # third-party errors may quote its user:password@
    scheme, fs_url = normalise_url(url)
    options = dict(storage_options or {})
    _check_mapping_options(options)
    if scheme == "s3":
        if "@" in urlsplit(fs_url).netloc:
            # s3fs would take "user:password@bucket" for the bucket name, and botocore
            # then quote it in a "Parameter validation failed" message.
            raise StorageAccessError(
                f"{redact_url(url)}: an s3:// URL cannot carry credentials "
                "(user:password@ before the bucket name)",
                hint="give them with -S key=... -S secret=..., or the AWS_ACCESS_KEY_ID "
                "and AWS_SECRET_ACCESS_KEY variables",
            )
        number_option("retries", options.pop("retries", 2), int)
        options = _s3_options(options)
    return options
