"""The one storage layer: every byte ckpt reads or deletes goes through :class:`Storage`.

A checkpoint is listed once, recursively, into a :class:`Listing` of :class:`FileEntry`
(checkpoint-relative path, size, modification time). Everything later works from that
listing; there are no per-file exists/HEAD checks, and file contents are only read on demand.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from ckpt_cli.errors import (
    CheckpointNotFound,
    MissingExtraError,
    NotACheckpoint,
    StorageAccessError,
)
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink

# Spark users write s3a:// (Hadoop's connector); fsspec's s3fs serves it as s3.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "az": "abfs", "adl": "abfs"}
# Which optional extra provides which scheme, for the "missing extra" message.
_SCHEME_EXTRAS = {"s3": "s3", "abfs": "azure", "gs": "gcs (pip install gcsfs)"}


class FileEntry(NamedTuple):
    """One file of the listing. ``path`` is relative to the checkpoint root, '/'-separated.

    A NamedTuple rather than a dataclass: listings hold hundreds of thousands of these.
    """

    path: str
    size: int
    mtime: float | None  # seconds since the epoch, None when the store does not say

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def parent(self) -> str:
        return self.path.rsplit("/", 1)[0] if "/" in self.path else ""


@dataclass
class StorageStats:
    """Requests made through this storage, counted at the storage layer."""

    list_calls: int = 0
    read_calls: int = 0
    bytes_read: int = 0
    delete_requests: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "list_calls": self.list_calls,
            "read_calls": self.read_calls,
            "bytes_read": self.bytes_read,
            "delete_requests": self.delete_requests,
        }


class Listing:
    """The result of the one recursive listing of a checkpoint, sorted by path."""

    def __init__(self, entries: list[FileEntry]) -> None:
        entries.sort()  # tuples sort by path first, and paths are unique
        self.entries: tuple[FileEntry, ...] = tuple(entries)
        self._by_path: dict[str, FileEntry] | None = None

    @classmethod
    def of(cls, entries: list[FileEntry]) -> Listing:
        return cls(entries)

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, path: str) -> FileEntry | None:
        if self._by_path is None:
            self._by_path = {e.path: e for e in self.entries}
        return self._by_path.get(path)


def redact_url(url: str) -> str:
    """Drop credentials and query strings (SAS tokens) from a URL before it is shown."""
    parts = urlsplit(url)
    if not parts.scheme or len(parts.scheme) == 1:  # a plain path, or a Windows drive
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    if "@" in parts.netloc and parts.scheme in ("abfs", "abfss", "az"):
        netloc = parts.netloc  # container@account is not a credential
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _normalise_url(url: str) -> tuple[str, str]:
    """Return (scheme, url with fsspec's scheme name)."""
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+)://", url)
    if not match:
        return "file", url
    scheme = match.group(1).lower()
    canonical = _SCHEME_ALIASES.get(scheme, scheme)
    if canonical != scheme:
        url = canonical + url[len(scheme) :]
    return canonical, url


def _mtime_of(info: Mapping[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, _dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=_dt.timezone.utc)
            return value.timestamp()
        if isinstance(value, str):
            try:
                return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


class Storage:
    """A checkpoint location on some filesystem, with the operations ckpt needs."""

    def __init__(self, fs: Any, root: str, url: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.url = url
        self.stats = StorageStats()
        self._is_local = type(fs).__name__ == "LocalFileSystem"

    @classmethod
    def from_url(cls, url: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
        """Open a checkpoint location: a local path, ``file://``, ``s3://``, ``abfs://``...

        Nothing is read or listed yet.
        """
        import fsspec.core

        scheme, fs_url = _normalise_url(url)
        try:
            fs, path = fsspec.core.url_to_fs(fs_url, **dict(storage_options or {}))
        except ImportError as exc:
            extra = _SCHEME_EXTRAS.get(scheme)
            install = f"pip install 'ckpt-cli[{extra}]'" if extra and " " not in extra else extra
            raise MissingExtraError(
                f"{redact_url(url)}: support for {scheme}:// is not installed",
                hint=f"install it with: {install}" if install else str(exc),
            ) from exc
        except ValueError as exc:
            # fsspec raises ValueError for unknown protocols.
            raise StorageAccessError(f"{redact_url(url)}: {exc}") from exc
        if type(fs).__name__ == "LocalFileSystem":
            path = os.path.abspath(path)
        return cls(fs, path, redact_url(url))

    # -- paths ---------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self._is_local

    def full_path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def display(self, rel: str) -> str:
        """How a checkpoint file is named in messages: relative to the checkpoint."""
        return rel or self.url

    # -- listing -------------------------------------------------------------------------

    def list_all(self, progress: ProgressSink = NULL_PROGRESS) -> Listing:
        """List every file under the checkpoint once, recursively.

        Raises CheckpointNotFound for a missing location, NotACheckpoint for a file, and
        StorageAccessError when the store refuses the listing.
        """
        progress.start("Listing checkpoint")
        try:
            entries = self._list_local() if self._is_local else self._list_fsspec()
        finally:
            progress.close()
        return Listing.of(entries)

    def _list_local(self) -> list[FileEntry]:
        # os.scandir is ~3x faster than fsspec's LocalFileSystem.find (which stats through
        # info() and builds a dict per file); it is still one pass over the tree.
        entries: list[FileEntry] = []
        root = self.root
        prefix_len = len(root) + 1
        stack = [root]
        while stack:
            directory = stack.pop()
            self.stats.list_calls += 1
            try:
                with os.scandir(directory) as it:
                    for item in it:
                        if item.is_dir(follow_symlinks=True):
                            stack.append(item.path)
                            continue
                        st = item.stat(follow_symlinks=True)
                        entries.append(FileEntry(item.path[prefix_len:], st.st_size, st.st_mtime))
            except FileNotFoundError as exc:
                if directory == root:
                    raise CheckpointNotFound(f"{self.url}: no such file or directory") from exc
                raise StorageAccessError(
                    f"{directory[prefix_len:]}: disappeared while listing the checkpoint",
                    hint="is a query or another tool changing it right now?",
                ) from exc
            except NotADirectoryError as exc:
                if directory == root:
                    raise NotACheckpoint(
                        f"{self.url}: is a file, not a checkpoint directory",
                        hint="pass the checkpointLocation directory of the query",
                    ) from exc
                raise StorageAccessError(f"{directory}: {exc.strerror}") from exc
            except PermissionError as exc:
                where = self.url if directory == root else directory[prefix_len:]
                raise StorageAccessError(f"{where}: permission denied while listing") from exc
            except OSError as exc:
                where = self.url if directory == root else directory[prefix_len:]
                raise StorageAccessError(f"{where}: cannot list: {exc.strerror or exc}") from exc
        return entries

    def _list_fsspec(self) -> list[FileEntry]:
        self.stats.list_calls += 1
        try:
            found: Mapping[str, Mapping[str, Any]] = self.fs.find(
                self.root, detail=True, withdirs=False
            )
        except FileNotFoundError as exc:
            raise CheckpointNotFound(f"{self.url}: no such file or directory") from exc
        except PermissionError as exc:
            raise StorageAccessError(f"{self.url}: permission denied while listing") from exc
        except OSError as exc:
            raise StorageAccessError(f"{self.url}: cannot list: {exc}") from exc
        root = self.fs._strip_protocol(self.root).rstrip("/")
        prefix = root + "/"
        entries: list[FileEntry] = []
        for name, info in found.items():
            name = self.fs._strip_protocol(name)
            if info.get("type") == "directory" or name.endswith("/"):
                continue  # S3 "folder" marker objects are not files of the checkpoint
            if name == root:
                raise NotACheckpoint(
                    f"{self.url}: is a file, not a checkpoint directory",
                    hint="pass the checkpointLocation directory of the query",
                )
            if not name.startswith(prefix):
                continue
            entries.append(
                FileEntry(name[len(prefix) :], int(info.get("size") or 0), _mtime_of(info))
            )
        if not entries and not self._exists_root():
            raise CheckpointNotFound(f"{self.url}: no such file or directory")
        return entries

    def _exists_root(self) -> bool:
        # Only called on the error path (an empty listing), to tell "missing" from "empty".
        try:
            return bool(self.fs.exists(self.root))
        except OSError:
            return False

    # -- reading -------------------------------------------------------------------------

    def read_bytes(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """Read a checkpoint file (or a byte range of it)."""
        self.stats.read_calls += 1
        try:
            data: bytes = self.fs.cat_file(self.full_path(rel), start=start, end=end)
        except FileNotFoundError as exc:
            raise StorageAccessError(
                f"{rel}: listed but no longer exists",
                hint="is a query or another tool changing the checkpoint right now?",
            ) from exc
        except IsADirectoryError as exc:
            raise StorageAccessError(f"{rel}: is a directory, expected a file") from exc
        except PermissionError as exc:
            raise StorageAccessError(f"{rel}: permission denied") from exc
        except OSError as exc:
            raise StorageAccessError(f"{rel}: cannot read: {exc}") from exc
        self.stats.bytes_read += len(data)
        return data

    @contextmanager
    def open_stream(self, rel: str) -> Iterator[_CountingReader]:
        """A binary stream over a checkpoint file, for readers that work in bounded memory.

        Opening and reading errors become StorageAccessError naming ``rel``.
        """
        self.stats.read_calls += 1
        try:
            fh = self.fs.open(self.full_path(rel), "rb")
        except FileNotFoundError as exc:
            raise StorageAccessError(
                f"{rel}: listed but no longer exists",
                hint="is a query or another tool changing the checkpoint right now?",
            ) from exc
        except PermissionError as exc:
            raise StorageAccessError(f"{rel}: permission denied") from exc
        except OSError as exc:
            raise StorageAccessError(f"{rel}: cannot read: {exc}") from exc
        counted = _CountingReader(fh, self.stats)
        try:
            yield counted
        finally:
            fh.close()

    # -- writing and deleting ------------------------------------------------------------

    def delete_many(self, rels: list[str]) -> int:
        """Delete checkpoint files; returns the requests made.

        Object stores get one ``rm`` of the whole list (s3fs sends multi-object deletes of up
        to 1000 keys per request); local files are unlinked one by one. A file already gone is
        not an error (an earlier, interrupted cleanup may have removed it).
        """
        if not rels:
            return 0
        paths = [self.full_path(r) for r in rels]
        try:
            if self._is_local:
                for path in paths:
                    with suppress(FileNotFoundError):
                        os.unlink(path)
                self.stats.delete_requests += len(paths)
                return len(paths)
            self.fs.rm(paths)
        except FileNotFoundError:
            pass
        except PermissionError as exc:
            raise StorageAccessError(f"{rels[0]}: permission denied while deleting") from exc
        except OSError as exc:
            raise StorageAccessError(f"{rels[0]}: cannot delete: {exc}") from exc
        requests = -(-len(paths) // 1000)
        self.stats.delete_requests += requests
        return requests

    def write_text_absolute(self, location: str, text: str) -> None:
        """Write a file outside the checkpoint (a manifest), on the same filesystem unless
        ``location`` is a URL of another one."""
        import fsspec.core

        try:
            if "://" in location:
                with fsspec.core.open(location, "w", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                with self.fs.open(location, "w", encoding="utf-8") as fh:
                    fh.write(text)
        except OSError as exc:
            raise StorageAccessError(f"{location}: cannot write: {exc}") from exc


class _CountingReader:
    """Counts the bytes read into StorageStats and turns read errors into StorageAccessError."""

    def __init__(self, fh: Any, stats: StorageStats) -> None:
        self._fh = fh
        self._stats = stats

    def read(self, n: int = -1, /) -> bytes:
        try:
            data: bytes = self._fh.read(n)
        except OSError as exc:
            raise StorageAccessError(
                f"{getattr(self._fh, 'path', '?')}: cannot read: {exc}"
            ) from exc
        self._stats.bytes_read += len(data)
        return data
