"""The one storage layer: every byte ckpt reads or deletes goes through :class:`Storage`.

A checkpoint is listed once, recursively, into a :class:`Listing` of :class:`FileEntry`
(checkpoint-relative path, size, modification time). Everything later works from that
listing; there are no per-file exists/HEAD checks, and file contents are only read on demand.
"""

from __future__ import annotations

import datetime as _dt
import io
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ckpt_cli import secrets
from ckpt_cli.errors import (
    CheckpointNotFound,
    CkptError,
    MissingExtraError,
    NotACheckpoint,
    OutsideCheckpointError,
    StorageAccessError,
)
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.requests_count import attach_request_counter

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
    """Requests made through one storage, counted where they are made.

    On object stores the request counters are fed by a hook on the filesystem's HTTP client
    (:mod:`ckpt_cli.requests_count`): one count per API request, pages of a listing included.
    On local disk a "list" is one directory scanned, a "get" one file opened, a "delete" one
    unlink. ``files_read`` counts ckpt's own reads of checkpoint files, on any store.
    """

    list: int = 0
    head: int = 0
    get: int = 0
    put: int = 0  # puts and copies
    delete: int = 0
    other: int = 0
    bytes_read: int = 0
    files_read: int = 0

    # Names used before the request counters existed.
    @property
    def list_calls(self) -> int:
        return self.list

    @property
    def read_calls(self) -> int:
        return self.files_read

    @property
    def delete_requests(self) -> int:
        return self.delete

    def add(self, other: StorageStats) -> None:
        for name in _STAT_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _STAT_FIELDS}

    def summary(self) -> str:
        """One line for humans: ``requests: 2 list, 0 head, 14 get, ...; 31.2 kB read``."""
        counts = ", ".join(
            f"{getattr(self, n)} {label}"
            for n, label in (
                ("list", "list"),
                ("head", "head"),
                ("get", "get"),
                ("put", "put/copy"),
                ("delete", "delete"),
            )
        )
        extra = f", {self.other} other" if self.other else ""
        return f"requests: {counts}{extra}; {_human_bytes(self.bytes_read)} read"


_STAT_FIELDS = ("list", "head", "get", "put", "delete", "other", "bytes_read", "files_read")


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


# Every Storage of this process, for `--stats` (a command may open more than one).
_ALL_STATS: list[StorageStats] = []


def reset_process_stats() -> None:
    """Forget the storages opened so far (a command starts counting from zero)."""
    _ALL_STATS.clear()


def process_stats() -> StorageStats:
    """The requests of every storage opened in this process so far."""
    total = StorageStats()
    for stats in _ALL_STATS:
        total.add(stats)
    return total


class Listing:
    """The result of the one recursive listing of a checkpoint, sorted by path.

    ``symlinks`` maps the checkpoint-relative path of every symbolic link met on local disk to
    what it resolves to. A link to a directory is not descended into (its files are not
    listed); a link to a file is listed like a file (Spark reads through it) but nothing ever
    deletes or moves it when it resolves outside the checkpoint.
    """

    def __init__(self, entries: list[FileEntry], symlinks: dict[str, str] | None = None) -> None:
        entries.sort()  # tuples sort by path first, and paths are unique
        self.entries: tuple[FileEntry, ...] = tuple(entries)
        self.symlinks: dict[str, str] = dict(sorted((symlinks or {}).items()))
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


# Bounded waiting on S3: botocore's defaults wait 60 s per attempt on a silent endpoint.
S3_DEFAULTS = {"connect_timeout": 10, "read_timeout": 60, "max_attempts": 3}


def _s3_options(options: dict[str, Any]) -> dict[str, Any]:
    """``connect_timeout``, ``read_timeout`` and ``max_attempts`` as plain storage options
    (``-o read_timeout=5``), with bounded defaults, moved into botocore's config."""
    options = dict(options)
    config = dict(options.pop("config_kwargs", None) or {})
    for key, default in S3_DEFAULTS.items():
        value = options.pop(key, default)
        if key == "max_attempts":
            attempts = _number_option(key, value, int)
            config.setdefault("retries", {"max_attempts": attempts, "mode": "standard"})
        else:
            config.setdefault(key, _number_option(key, value, float))
    options["config_kwargs"] = config
    return options


N = TypeVar("N", int, float)


def _number_option(key: str, value: Any, kind: type[N]) -> N:
    try:
        if isinstance(value, bool):
            raise ValueError
        return kind(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise CkptError(f"storage option {key}: expected {what}, found {value!r}") from None


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
    scheme, fs_url = _normalise_url(url)
    options = dict(storage_options or {})
    _check_mapping_options(options)
    if scheme == "s3":
        if "@" in urlsplit(fs_url).netloc:
            # s3fs would take "user:password@bucket" for the bucket name, and botocore
            # then quote it in a "Parameter validation failed" message.
            raise StorageAccessError(
                f"{redact_url(url)}: an s3:// URL cannot carry credentials "
                "(user:password@ before the bucket name)",
                hint="give them with -o key=... -o secret=..., or the AWS_ACCESS_KEY_ID "
                "and AWS_SECRET_ACCESS_KEY variables",
            )
        _number_option("retries", options.pop("retries", 2), int)
        options = _s3_options(options)
    return options


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

    def __init__(self, fs: Any, root: str, url: str, endpoint: str = "") -> None:
        self.fs = fs
        self.endpoint = endpoint  # shown in connection errors
        self.root = root.rstrip("/") or "/"
        self.url = url
        self.stats = StorageStats()
        _ALL_STATS.append(self.stats)
        self._is_local = type(fs).__name__ == "LocalFileSystem"
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
    def from_url(cls, url: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
        """Open a checkpoint location: a local path, ``file://``, ``s3://``, ``abfs://``...

        Nothing is read or listed yet.
        """
        import fsspec.core

        scheme, fs_url = _normalise_url(url)
        options = dict(storage_options or {})
        # s3fs retries timeouts on its own, on top of botocore (a class attribute, 5).
        s3fs_retries = (
            _number_option("retries", options.pop("retries", 2), int) if scheme == "s3" else None
        )
        options = fsspec_options(url, options)
        if scheme not in ("file", "memory"):
            # A filesystem of our own: fsspec shares instances between equal URLs, and the
            # request counter hooks into this instance's client.
            options.setdefault("skip_instance_cache", True)
        try:
            fs, path = fsspec.core.url_to_fs(fs_url, **options)
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
        endpoint = str(
            options.get("endpoint_url")
            or (options.get("client_kwargs") or {}).get("endpoint_url")
            or options.get("account_url")
            or ""
        )
        storage = cls(fs, path, redact_url(url), redact_url(endpoint))
        storage._fs_settings = {"retries": s3fs_retries} if s3fs_retries is not None else {}
        storage._apply_fs_settings()
        return storage

    def _apply_fs_settings(self) -> None:
        for name, value in self._fs_settings.items():
            setattr(self.fs, name, value)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # In a worker process or Spark task: fsspec rebuilds the filesystem from its
        # constructor arguments, without the settings and the request hook made after it.
        self.__dict__.update(state)
        self._apply_fs_settings()
        self.stats = StorageStats()
        _ALL_STATS.append(self.stats)
        self._counted_by_client = not self._is_local and attach_request_counter(self.fs, self.stats)

    # -- paths ---------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self._is_local

    def full_path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def check_within(self, path: str, base: str, name: str) -> str:
        """Refuse ``path`` unless it resolves inside ``base`` (the checkpoint root or a
        quarantine): the one check every delete, move and write goes through. Locally the real
        path (symbolic links resolved) is compared; on object stores the key prefix, with no
        ``.``/``..`` segments. Returns ``path``; raises OutsideCheckpointError."""
        path = _strip(self, path)
        base = _strip(self, base).rstrip("/") or "/"
        if self._is_local:
            real = self._realpath(path)
            real_base = self._realpath(base)
            inside = real == real_base or real.startswith(real_base.rstrip(os.sep) + os.sep)
            if not inside:
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
        symlinks: dict[str, str] = {}
        try:
            entries = self._list_local(symlinks) if self._is_local else self._list_fsspec()
        finally:
            progress.close()
        listing = Listing(entries, symlinks)
        self.use_listing(listing)
        return listing

    def use_listing(self, listing: Listing) -> None:
        """Take file sizes from ``listing``: streams then know where objects end."""
        if not self._is_local:
            self._sizes = {e.path: e.size for e in listing}

    def _list_local(self, symlinks: dict[str, str]) -> list[FileEntry]:
        # os.scandir is ~3x faster than fsspec's LocalFileSystem.find (which stats through
        # info() and builds a dict per file); it is still one pass over the tree.
        # Symbolic links are recorded in ``symlinks``; links to directories are not followed,
        # so nothing under them is ever planned for deletion.
        entries: list[FileEntry] = []
        root = self.root
        prefix_len = len(root) + 1
        stack = [root]
        while stack:
            directory = stack.pop()
            self.stats.list += 1
            try:
                with os.scandir(directory) as it:
                    for item in it:
                        if item.is_symlink():
                            symlinks[item.path[prefix_len:]] = os.path.realpath(item.path)
                            # os.path.isdir, not DirEntry.is_dir: a link loop (ELOOP) is a
                            # dangling link here, as for Hadoop's listStatus, not a crash.
                            if os.path.isdir(item.path) or not os.path.exists(item.path):
                                continue  # not followed / a dangling link: nothing to list
                        elif item.is_dir(follow_symlinks=False):
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
        if not self._counted_by_client:
            self.stats.list += 1
        try:
            found: Mapping[str, Mapping[str, Any]] = self.fs.find(
                self.root, detail=True, withdirs=False
            )
        except FileNotFoundError as exc:
            raise CheckpointNotFound(
                f"{self.url}: no such bucket, container or prefix ({_first_line(exc)})"
            ) from exc
        except Exception as exc:  # the clients' own errors too: one line, never a traceback
            raise store_error(self.url, "list", exc, self.endpoint) from exc
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
            raise CheckpointNotFound(f"{self.url}: no such file or directory (nothing there)")
        return entries

    def _exists_root(self) -> bool:
        # Only called on the error path (an empty listing), to tell "missing" from "empty".
        try:
            return bool(self.fs.exists(self.root))
        except OSError:
            return False

    # -- reading -------------------------------------------------------------------------

    def read_bytes(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """Read a checkpoint file (or a byte range of it): one GET, never a HEAD."""
        self.stats.files_read += 1
        if start is None and end is None and rel in self._prefetched:
            data = self._prefetched.pop(rel)
            self.stats.bytes_read += len(data)
            return data
        data = self._get(rel, start, end)
        self.stats.bytes_read += len(data)
        return data

    def _get(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """One GET of a file or a byte range of it, counted here unless the client counts."""
        if not self._counted_by_client:
            self.stats.get += 1
        try:
            return bytes(self.fs.cat_file(self.full_path(rel), start=start, end=end))
        except Exception as exc:
            raise _read_error(rel, exc) from exc

    def prefetch(self, rels: list[str], *, heads: bool = False, workers: int = 16) -> None:
        """Read many small files concurrently ahead of ``read_bytes`` (object stores only:
        local reads are cheap); ``heads``: only their first ``HEADER_BLOCK`` bytes, ahead of
        ``open_stream(header_only=True)``. A file that fails here is left out, and fails
        again, with its message, when it is read."""
        cache = self._heads if heads else self._prefetched
        wanted = [r for r in dict.fromkeys(rels) if r not in cache]
        if self._is_local or len(wanted) < 2:
            return
        from concurrent.futures import ThreadPoolExecutor

        def fetch(rel: str) -> tuple[str, bytes | None]:
            end = min(self._sizes.get(rel, HEADER_BLOCK), HEADER_BLOCK) if heads else None
            try:
                return rel, self._get(rel, 0, end)
            except CkptError:  # read again when it is wanted, and the error reported then
                return rel, None

        # Threads only wait: async stores run the requests together on their event loop.
        with ThreadPoolExecutor(max_workers=min(workers, len(wanted))) as pool:
            for rel, data in pool.map(fetch, wanted):
                if data is not None:
                    cache[rel] = data

    @contextmanager
    def open_stream(self, rel: str, *, header_only: bool = False) -> Iterator[_CountingReader]:
        """A binary stream over a checkpoint file, for readers that work in bounded memory.

        On object stores it reads ranges of ``STREAM_BLOCK`` bytes with the size from the
        listing, so opening costs no HEAD; ``header_only`` (a changelog's lineage line) makes
        the first range ``HEADER_BLOCK`` bytes. Errors become StorageAccessError naming ``rel``.
        """
        self.stats.files_read += 1
        size = self._sizes.get(rel)
        fh: Any
        if size is not None and not self._is_local:
            head = self._heads.pop(rel, b"") if header_only else b""
            block = HEADER_BLOCK if header_only else STREAM_BLOCK
            fh = _RangedFile(self, rel, size, block, head)
        else:
            if not self._counted_by_client:
                self.stats.get += 1
            try:
                fh = self.fs.open(self.full_path(rel), "rb")
            except Exception as exc:
                raise _read_error(rel, exc) from exc
        counted = _CountingReader(fh, self.stats, rel)
        try:
            yield counted
        finally:
            fh.close()

    @contextmanager
    def open_random(self, rel: str) -> Iterator[Any]:
        """A seekable binary file for formats read from the end (a zip's central directory):
        on object stores, ranged GETs of what is read (the last ``HEADER_BLOCK`` bytes
        fetched up front), so a large zip costs two small requests instead of one big one."""
        size = self._sizes.get(rel)
        if size is None or self._is_local:
            with self.open_stream(rel) as stream:
                yield io.BytesIO(stream.read())
            return
        self.stats.files_read += 1
        yield _SeekableRangedFile(self, rel, size)

    # -- writing and deleting ------------------------------------------------------------

    def delete_many(self, rels: list[str]) -> int:
        """Delete checkpoint files; returns the requests made.

        Object stores get one ``rm`` of the whole list (s3fs sends multi-object deletes of up
        to 1000 keys per request, adlfs batches); local files are unlinked one by one. A file
        already gone is not an error (an earlier, interrupted cleanup may have removed it).
        """
        if not rels:
            return 0
        # Every path is checked before the first is deleted, directories resolved afresh.
        self._real_dirs.clear()
        paths = [self.contained(r) for r in rels]
        before = self.stats.delete
        try:
            if self._is_local:
                for path in paths:
                    with suppress(FileNotFoundError):
                        os.unlink(path)
                self.stats.delete += len(paths)
                return len(paths)
            self.fs.rm(paths)
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise store_error(rels[0], "delete", exc, self.endpoint) from exc
        if not self._counted_by_client:
            self.stats.delete += -(-len(paths) // 1000)
        return self.stats.delete - before

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
        except Exception as exc:
            raise store_error(location, "write", exc, self.endpoint) from exc

    @contextmanager
    def open_write(self, rel: str) -> Iterator[BinaryIO]:
        """A binary file for writing ``rel`` under this storage's root (parents created);
        one put."""
        path = self.full_path(rel)
        where = f"{self.url.rstrip('/')}/{rel}"
        try:
            if self._is_local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fh = open(path, "wb")  # noqa: SIM115 - closed below
            else:
                fh = self.fs.open(path, "wb")
        except Exception as exc:
            raise store_error(where, "write", exc, self.endpoint) from exc
        if not self._counted_by_client:
            self.stats.put += 1
        try:
            yield fh
        except BaseException:
            fh.close()
            raise
        try:
            fh.close()  # object stores upload here
        except Exception as exc:
            raise store_error(where, "write", exc, self.endpoint) from exc


def _strip(storage: Storage, location: str) -> str:
    if "://" in location:
        return str(storage.fs._strip_protocol(location))
    return location


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def classify_store_error(exc: BaseException) -> tuple[str, str]:
    """What kind of failure an object-store client raised, and a one-line description.

    Kinds: ``credentials``, ``denied``, ``not_found``, ``connect``, ``other``. Clients are
    recognised by class name (botocore, aiohttp, azure-core) so none has to be installed.
    """
    for e in _exception_chain(exc):
        names = {c.__name__ for c in type(e).__mro__}
        status = getattr(e, "status_code", None) or getattr(e, "status", None)
        if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}:
            return "credentials", _first_line(e)
        if names & {"ClientAuthenticationError"} or status in (401, 403):
            return "denied", _first_line(e)
        if isinstance(e, PermissionError):
            return "denied", _first_line(e)
        if names & {"ResourceNotFoundError"} or status == 404 or isinstance(e, FileNotFoundError):
            return "not_found", _first_line(e)
        if names & {
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ClientConnectorError",
            "ServiceRequestError",
            "ConnectionRefusedError",
            "ServerTimeoutError",
        } or isinstance(e, (ConnectionError, TimeoutError)):
            return "connect", _first_line(e)
    return "other", _first_line(exc)


def store_error(where: str, action: str, exc: BaseException, endpoint: str = "") -> CkptError:
    """A one-line error for a failed ``action`` ('read', 'list', ...) on ``where``."""
    if isinstance(exc, CkptError):
        return exc
    kind, detail = classify_store_error(exc)
    if kind == "credentials":
        return StorageAccessError(
            f"{where}: no credentials to {action} with ({detail})",
            hint="set AWS_*/AZURE_STORAGE_* variables, a profile, or --storage-option",
        )
    if kind == "denied":
        return StorageAccessError(f"{where}: access denied while trying to {action} ({detail})")
    if kind == "not_found":
        return CheckpointNotFound(f"{where}: no such file, bucket or container ({detail})")
    if kind == "connect":
        at = f" {endpoint}" if endpoint else ""
        return StorageAccessError(
            f"{where}: could not connect to the store{at} to {action} ({detail})",
            hint="check the endpoint and the network; retries were bounded",
        )
    return StorageAccessError(f"{where}: cannot {action}: {detail}")


def _read_error(rel: str, exc: BaseException) -> CkptError:
    if not isinstance(exc, OSError) or classify_store_error(exc)[0] in ("connect", "credentials"):
        return store_error(rel, "read", exc)
    if isinstance(exc, FileNotFoundError):
        return StorageAccessError(
            f"{rel}: listed but no longer exists",
            hint="is a query or another tool changing the checkpoint right now?",
        )
    if isinstance(exc, IsADirectoryError):
        return StorageAccessError(f"{rel}: is a directory, expected a file")
    if isinstance(exc, PermissionError):
        return StorageAccessError(f"{rel}: permission denied")
    return StorageAccessError(f"{rel}: cannot read: {exc}")


STREAM_BLOCK = 8 << 20
HEADER_BLOCK = 64 << 10  # a changelog's version and lineage lines, compressed, fit easily


class _RangedFile:
    """Sequential reads of an object in ranged GETs of STREAM_BLOCK bytes, size known."""

    def __init__(
        self, storage: Storage, rel: str, size: int, first_block: int, head: bytes = b""
    ) -> None:
        self._block = first_block  # grows to STREAM_BLOCK after the first request
        self._storage = storage
        self._rel = rel
        self._size = size
        self._pos = len(head)  # a prefetched head is served first
        self._buf = head
        self.path = rel

    def read(self, n: int = -1, /) -> bytes:
        if n is None or n < 0:
            n = self._size - self._pos + len(self._buf)
        while len(self._buf) < n and self._pos < self._size:
            end = min(self._size, self._pos + max(self._block, n - len(self._buf)))
            self._block = STREAM_BLOCK
            block = self._storage._get(self._rel, self._pos, end)
            if not block:
                break  # the object shrank since the listing: the reader reports truncation
            self._pos += len(block)
            self._buf += block
        out, self._buf = self._buf[:n], self._buf[n:]
        return bytes(out)

    def close(self) -> None:
        self._buf = b""


class _SeekableRangedFile(io.RawIOBase):
    """Random reads of an object by ranged GETs of at least HEADER_BLOCK bytes, kept."""

    def __init__(self, storage: Storage, rel: str, size: int) -> None:
        super().__init__()
        self._storage = storage
        self._rel = rel
        self._size = size
        self._pos = 0
        self._spans: list[tuple[int, bytes]] = []
        self._fetch(max(0, size - HEADER_BLOCK), size)

    def _fetch(self, start: int, end: int) -> bytes:
        data = self._storage._get(self._rel, start, end)
        self._storage.stats.bytes_read += len(data)
        self._spans.append((start, data))
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int | None = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        if end <= self._pos:
            return b""
        for start, data in self._spans:
            if start <= self._pos and end <= start + len(data):
                out = data[self._pos - start : end - start]
                break
        else:
            data = self._fetch(self._pos, min(self._size, max(end, self._pos + HEADER_BLOCK)))
            out = data[: end - self._pos]
        self._pos += len(out)
        return out

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _CountingReader:
    """Counts the bytes read into StorageStats and turns read errors into StorageAccessError."""

    def __init__(self, fh: Any, stats: StorageStats, rel: str) -> None:
        self._fh = fh
        self._stats = stats
        self._rel = rel

    def read(self, n: int = -1, /) -> bytes:
        try:
            data: bytes = self._fh.read(n)
        except OSError as exc:
            raise StorageAccessError(f"{self._rel}: cannot read: {exc}") from exc
        self._stats.bytes_read += len(data)
        return data
