"""Where a storage is: a filesystem, a root directory on it, the URL it was opened from,
and the one containment check every write, move and delete goes through."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, TypeVar

from ckpt_cli.errors import (
    CkptError,
    MissingExtraError,
    OutsideCheckpointError,
    StorageAccessError,
)
from ckpt_cli.install import missing_extra
from ckpt_cli.storage.credentials import resolve_credentials
from ckpt_cli.storage.errors import classify_store_error, first_line, store_error
from ckpt_cli.storage.local import LazyLocalFileSystem, lazily_local
from ckpt_cli.storage.stats import StorageStats, attach_request_counter
from ckpt_cli.storage.urls import (
    BACKENDS,
    HDFS_NEEDS,
    SCHEME_EXTRAS,
    fsspec_options,
    normalise_url,
    number_option,
    redact_url,
)

L = TypeVar("L", bound="Location")


def is_local_fs(fs: Any) -> bool:
    return isinstance(fs, LazyLocalFileSystem) or type(fs).__name__ == "LocalFileSystem"


class Location:
    """A directory on some filesystem (``fs``, ``root``; ``url`` as the user gave it, without
    credentials) and what resolves inside it. :class:`~ckpt_cli.storage.Storage` adds the
    operations on its files.

    ``stats`` counts the requests made; pass one to share it between storages (a command
    counting everything it does), else each storage has its own.
    """

    def __init__(
        self,
        fs: Any,
        root: str,
        url: str,
        endpoint: str = "",
        stats: StorageStats | None = None,
    ) -> None:
        self.fs = fs
        self.endpoint = endpoint  # shown in connection errors
        self.root = root.rstrip("/") or "/"
        self.url = url
        self.stats = StorageStats() if stats is None else stats
        self._is_local = is_local_fs(fs)
        self._sizes: dict[str, int] = {}  # from the listing: reads need no HEAD
        self._prefetched: dict[str, bytes] = {}
        self._heads: dict[str, bytes] = {}  # first bytes of files, for header-only reads
        self._fs_settings: dict[str, Any] = {}  # attributes set on fs after construction
        self.lock_token: str | None = None  # set while this process holds the ckpt lock
        self._real_dirs: dict[str, str] = {}  # containment checks: directory -> real path
        # Local and memory:// stores are counted by the methods below; object stores by
        # their HTTP client, which also sees what fsspec does on its own.
        self._counted_by_client = not self._is_local and attach_request_counter(fs, self.stats)

    @classmethod
    def from_url(
        cls: type[L],
        url: str,
        storage_options: Mapping[str, Any] | None = None,
        stats: StorageStats | None = None,
    ) -> L:
        """Open a location: a local path, ``file://``, ``s3://``, ``abfs://``... Nothing is
        read or listed yet. Requests are counted in ``stats`` (default: a new one)."""
        scheme, fs_url = normalise_url(url)
        options = dict(storage_options or {})
        # s3fs retries timeouts on its own, on top of botocore (a class attribute, 5).
        s3fs_retries = (
            number_option("retries", options.pop("retries", 2), int) if scheme == "s3" else None
        )
        options = fsspec_options(url, options)
        if scheme not in ("file", "memory"):
            # A filesystem of our own: fsspec shares instances between equal URLs, and the
            # request counter hooks into this instance's client.
            options.setdefault("skip_instance_cache", True)
        try:
            if scheme == "file" and not options and lazily_local(fs_url):
                fs = LazyLocalFileSystem()
                path = fs._strip_protocol(fs_url)
            else:
                import fsspec.core

                if scheme in BACKENDS:
                    importlib.import_module(BACKENDS[scheme])  # a missing extra first
                options = resolve_credentials(scheme, redact_url(url), options)
                fs, path = fsspec.core.url_to_fs(fs_url, **options)
        except ImportError as exc:
            extra = SCHEME_EXTRAS.get(scheme)
            if extra is None:
                raise MissingExtraError(
                    f"{redact_url(url)}: support for {scheme}:// is not installed",
                    hint=first_line(exc),
                ) from exc
            error = missing_extra(f"{redact_url(url)}: support for {scheme}://", extra, exc)
            if scheme == "hdfs":
                error.hint = f"it also needs {HDFS_NEEDS}"
            raise error from exc
        except OSError as exc:
            if scheme != "hdfs":
                raise
            # pyarrow is there, but libhdfs or the JVM under it is not ("Unable to load libjvm").
            raise MissingExtraError(
                f"{redact_url(url)}: hdfs:// cannot be opened: {first_line(exc)}",
                hint=f"it needs {HDFS_NEEDS}",
            ) from exc
        except ValueError as exc:
            # fsspec raises ValueError for unknown protocols.
            raise StorageAccessError(f"{redact_url(url)}: {exc}") from exc
        except CkptError:
            raise
        except Exception as exc:
            # gcsfs looks for its credentials as it is made (google-auth's errors).
            if classify_store_error(exc)[0] == "other":
                raise
            raise store_error(redact_url(url), "open it", exc) from exc
        if is_local_fs(fs):
            path = os.path.abspath(path)
        endpoint = str(
            options.get("endpoint_url")
            or (options.get("client_kwargs") or {}).get("endpoint_url")
            or options.get("account_url")
            or ""
        )
        storage = cls(fs, path, redact_url(url), redact_url(endpoint), stats)
        storage._fs_settings = {"retries": s3fs_retries} if s3fs_retries is not None else {}
        storage._apply_fs_settings()
        return storage

    def child(self: L, rel: str) -> L:
        """The directory ``rel`` of this storage as a storage of its own (a checkpoint found
        under a prefix): the same filesystem, client and request counts."""
        if not rel:
            url, root = self.url, self.root
        else:
            url, root = f"{self.url.rstrip('/')}/{rel}", self.full_path(rel)
        # Not through __init__: that would hook a second counter into the shared client.
        child = type(self).__new__(type(self))
        child.__dict__.update(self.__dict__)
        child.root, child.url, child.lock_token = root, url, None
        child._sizes, child._prefetched, child._heads, child._real_dirs = {}, {}, {}, {}
        return child

    def elsewhere(self: L, location: str) -> L:
        """Another directory of this filesystem (``location``: a path or URL on it, e.g. a
        quarantine) as a storage of its own: the same client and request counts."""
        other = self.child("")
        other.root = self._strip(location).rstrip("/") or "/"
        other.url = redact_url(location)
        return other

    def _apply_fs_settings(self) -> None:
        for name, value in self._fs_settings.items():
            setattr(self.fs, name, value)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # In a worker process or Spark task: fsspec rebuilds the filesystem from its
        # constructor arguments, without the settings and the request hook made after it.
        # The worker counts in its own stats and sends what it needs back with its results.
        self.__dict__.update(state)
        self._apply_fs_settings()
        self.stats = StorageStats()
        self._counted_by_client = not self._is_local and attach_request_counter(self.fs, self.stats)

    def _count(self, kind: str, n: int = 1) -> None:
        """Count requests ckpt makes itself, unless the client counts them as they go."""
        if not self._counted_by_client:
            self.stats.bump(kind, n)

    # -- paths ---------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self._is_local

    @property
    def spark_location(self) -> str:
        """This location as Spark records it in a checkpoint: ``file:/abs/path`` on local
        disk (Hadoop's ``Path.toString``), ``s3a://`` for S3 (the connector Spark uses),
        else the URL."""
        if self._is_local:
            return f"file:{self.root}"
        url = self.url.rstrip("/")
        return "s3a://" + url.removeprefix("s3://") if url.startswith("s3://") else url

    def full_path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def display(self, rel: str) -> str:
        """How a checkpoint file is named in messages: relative to the checkpoint."""
        return rel or self.url

    def _strip(self, location: str) -> str:
        """A URL on this filesystem as the path its methods take."""
        return str(self.fs._strip_protocol(location)) if "://" in location else location

    def check_within(self, path: str, base: str, name: str) -> str:
        """Refuse ``path`` unless it resolves inside ``base`` (the checkpoint root or a
        quarantine): the one check every delete, move and write goes through. Locally the real
        path (symbolic links resolved) is compared; on object stores the key prefix, with no
        ``.``/``..`` segments. Returns ``path`` without its scheme; raises
        OutsideCheckpointError."""
        path = self._strip(path)
        base = self._strip(base).rstrip("/") or "/"
        if self._is_local:
            real = self._realpath(path)
            real_base = self._realpath(base)
            # Strictly inside, as on object stores: never the base directory itself.
            if not real.startswith(real_base.rstrip(os.sep) + os.sep):
                raise OutsideCheckpointError(
                    f"{name}: resolves to {real}, outside {base}; not touching it",
                    hint="a symbolic link points outside; ckpt never deletes, moves or writes "
                    "through one",
                )
            return path
        rest = path[len(base) + 1 :] if path.startswith(base + "/") else None
        if not rest or any(part in ("", ".", "..") for part in rest.split("/")):
            raise OutsideCheckpointError(f"{name}: {path} is not a key under {base}")
        return path

    def _realpath(self, path: str) -> str:
        """``os.path.realpath`` with the directories' real paths cached: a plain realpath
        stats every component of every path (~0.5 ms a file here)."""
        parent, _, name = path.rpartition("/")
        if not parent or name in ("", ".", ".."):
            return os.path.realpath(path)
        real_parent = self._real_dirs.get(parent)
        if real_parent is None:
            real_parent = self._real_dirs[parent] = os.path.realpath(parent)
        full = os.path.join(real_parent, name)
        return os.path.realpath(full) if os.path.islink(full) else full

    def contained(self, rel: str) -> str:
        """The full path of checkpoint file ``rel``, refused when it resolves outside."""
        return self.check_within(self.full_path(rel), self.root, rel)

    def outside(self, rels: list[str]) -> dict[str, str]:
        """Which of ``rels`` resolve outside the checkpoint, with the reason for each."""
        found: dict[str, str] = {}
        self._real_dirs.clear()
        for rel in rels:
            try:
                self.contained(rel)
            except OutsideCheckpointError as exc:
                found[rel] = exc.message
        return found
