"""The one recursive listing of a checkpoint: :class:`FileEntry` per file (path relative to
the root, size, modification time), walked with ``os.scandir`` on local disk and one
``find`` on every other filesystem."""

from __future__ import annotations

import datetime as _dt
import gc
import os
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from operator import itemgetter
from typing import Any, NamedTuple

from ckpt_cli.errors import CheckpointNotFound, NotACheckpoint, StorageAccessError
from ckpt_cli.storage.errors import first_line, store_error
from ckpt_cli.storage.stats import StorageStats


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


class Listing:
    """The result of the one recursive listing of a checkpoint, sorted by path.

    ``symlinks`` maps the checkpoint-relative path of every symbolic link met on local disk to
    what it resolves to. A link to a directory is not descended into (its files are not
    listed); a link to a file is listed like a file (Spark reads through it) but nothing ever
    deletes or moves it when it resolves outside the checkpoint.
    """

    def __init__(self, entries: list[FileEntry], symlinks: dict[str, str] | None = None) -> None:
        # By path, and paths are unique: keyed by the path alone, the sort compares strings
        # directly rather than tuples (half the time at 176k files).
        entries.sort(key=_path)
        self.entries: tuple[FileEntry, ...] = tuple(entries)
        self.symlinks: dict[str, str] = dict(sorted((symlinks or {}).items()))
        self._by_path: dict[str, int] | None = None
        self._searches = 0

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, path: str) -> FileEntry | None:
        """The entry at ``path``, else None (see :meth:`index`)."""
        i = self.index(path)
        return None if i is None else self.entries[i]

    def index(self, path: str) -> int | None:
        """Where the entry at ``path`` is in ``entries``, else None: a binary search until
        the searches would have paid for a dict of every path (a restart check looks up a
        file and its sidecars per partition: 1,600 searches cost 3 ms at 176k files, the
        dict 0.1 s), a dict after."""
        if self._by_path is None:
            self._searches += 1
            if self._searches <= max(_SEARCHES_BEFORE_INDEX, len(self.entries) >> 3):
                i = bisect_left(self.entries, path, key=_path)
                found = i < len(self.entries) and self.entries[i].path == path
                return i if found else None
            self._by_path = {e.path: i for i, e in enumerate(self.entries)}
        return self._by_path.get(path)


# A dict of n paths costs about as much as n / 4 binary searches; an eighth keeps the
# searches' total below the dict's.
_SEARCHES_BEFORE_INDEX = 64
_path = itemgetter(0)  # FileEntry.path


# Listings from this size on are frozen out of the collector's reach (see freeze_if_large).
FREEZE_FROM_FILES = 10_000


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a listing and its model are built, and
    restore its state after, errors included.

    A listing makes two small tuples per file (FileEntry, then CheckpointFile) that all stay
    alive. Each collection the allocations trigger walks every one of them again, which made
    listing and classifying grow 5.8x for 4x the files at 800 partitions x 100 versions.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze_if_large(files: int) -> None:
    """Move what is alive now (a listing of ``files`` files and its model among it) to the
    collector's permanent generation, so later collections (while the commands work) no
    longer walk it.

    Reference counting still frees these objects (the listing's tuples hold no cycles);
    only cyclic garbage alive right now would be kept, so small listings, where the collector
    costs little, are left alone.
    """
    if files >= FREEZE_FROM_FILES:
        gc.freeze()


def not_a_directory(url: str) -> NotACheckpoint:
    return NotACheckpoint(
        f"{url}: is a file, not a checkpoint directory",
        hint="pass the checkpointLocation directory of the query",
    )


# Directories are opened once and their files stat'ed relative to them (fstatat): the kernel
# then resolves one name per file instead of the whole path, a third less system time.
_BY_FD = os.scandir in os.supports_fd and os.stat in os.supports_dir_fd
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)


def list_local(
    root: str, url: str, stats: StorageStats, symlinks: dict[str, str]
) -> list[FileEntry]:
    """Every file under local directory ``root``, one ``os.scandir`` per directory.

    os.scandir is ~3x faster than fsspec's LocalFileSystem.find (which stats through info()
    and builds a dict per file). Symbolic links are recorded in ``symlinks``; links to
    directories are not followed, so nothing under them is ever planned for deletion.
    """
    entries: list[FileEntry] = []
    append = entries.append
    # tuple.__new__ itself: neither type.__call__ nor the namedtuple's own __new__ (a Python
    # function, one more frame per file).
    new = tuple.__new__
    base = root.rstrip("/")
    stack = [""]  # directories to scan, relative to root
    while stack:
        rel = stack.pop()
        stats.list += 1
        directory = f"{base}/{rel}" if rel else root
        prefix = f"{rel}/" if rel else ""
        try:
            fd = os.open(directory, _DIR_FLAGS) if _BY_FD else None
            try:
                with os.scandir(directory if fd is None else fd) as it:
                    for item in it:
                        # The common case first: a regular file, told by the directory
                        # entry's type without a system call.
                        if not item.is_file(follow_symlinks=False):
                            if item.is_dir(follow_symlinks=False):
                                stack.append(prefix + item.name)
                                continue
                            if item.is_symlink():
                                full = f"{directory}/{item.name}"
                                symlinks[prefix + item.name] = os.path.realpath(full)
                                # os.path.isdir, not DirEntry.is_dir: a link loop (ELOOP) is
                                # a dangling link here, as for Hadoop's listStatus.
                                if os.path.isdir(full) or not os.path.exists(full):
                                    continue  # not followed / dangling: nothing to list
                        st = item.stat()
                        append(new(FileEntry, (prefix + item.name, st.st_size, st.st_mtime)))
            finally:
                if fd is not None:
                    os.close(fd)
        except FileNotFoundError as exc:
            if not rel:
                raise CheckpointNotFound(f"{url}: no such file or directory") from exc
            raise StorageAccessError(
                f"{rel}: disappeared while listing the checkpoint",
                hint="is a query or another tool changing it right now?",
            ) from exc
        except NotADirectoryError as exc:
            if not rel:
                raise not_a_directory(url) from exc
            raise StorageAccessError(f"{directory}: {exc.strerror}") from exc
        except PermissionError as exc:
            where = rel or url
            raise StorageAccessError(f"{where}: permission denied while listing") from exc
        except OSError as exc:
            where = rel or url
            raise StorageAccessError(f"{where}: cannot list: {exc.strerror or exc}") from exc
    return entries


def list_objects(
    fs: Any, root: str, url: str, endpoint: str, strip: Callable[[str], str]
) -> list[FileEntry]:
    """Every object under ``root`` on an fsspec filesystem, in one ``find`` (one paged,
    un-delimited listing on object stores). ``strip`` drops the URL scheme from a path."""
    try:
        found: Mapping[str, Mapping[str, Any]] = fs.find(root, detail=True, withdirs=False)
    except FileNotFoundError as exc:
        raise CheckpointNotFound(
            f"{url}: no such bucket, container or prefix ({first_line(exc)})"
        ) from exc
    except Exception as exc:  # the clients' own errors too: one line, never a traceback
        raise store_error(url, "list", exc, endpoint) from exc
    base = strip(root).rstrip("/")
    prefix = base + "/"
    entries: list[FileEntry] = []
    for name, info in found.items():
        name = strip(name)
        if info.get("type") == "directory" or name.endswith("/"):
            continue  # S3 "folder" marker objects are not files of the checkpoint
        if name == base:
            raise not_a_directory(url)
        if not name.startswith(prefix):
            continue
        entries.append(FileEntry(name[len(prefix) :], int(info.get("size") or 0), _mtime_of(info)))
    if not entries and not _exists(fs, root):
        raise CheckpointNotFound(f"{url}: no such file or directory (nothing there)")
    return entries


def _exists(fs: Any, root: str) -> bool:
    # Only called on the error path (an empty listing), to tell "missing" from "empty".
    try:
        return bool(fs.exists(root))
    except OSError:
        return False


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
