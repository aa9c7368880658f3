"""The one storage layer: every byte ckpt lists, reads, writes, moves or deletes goes through
:class:`Storage`, and every path it changes is checked to resolve inside the checkpoint (or
the quarantine it was given) first."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, cast

from ckpt_cli.errors import CheckpointNotFound, CkptError, StorageAccessError
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.storage.deletes import delete_s3_objects, is_s3
from ckpt_cli.storage.errors import classify_store_error, read_error, store_error
from ckpt_cli.storage.listing import Listing, list_local, list_objects, not_a_directory
from ckpt_cli.storage.location import Location
from ckpt_cli.storage.ranged import (
    HEADER_BLOCK,
    STREAM_BLOCK,
    CountingReader,
    RangedFile,
    SeekableRangedFile,
)
from ckpt_cli.storage.urls import redact_url


class Storage(Location):
    """A checkpoint (or any directory) on some filesystem, with the operations ckpt needs:
    one recursive listing, reads that cost no HEAD, writes, moves and deletes."""

    # -- listing -------------------------------------------------------------------------

    def list_all(self, progress: ProgressSink = NULL_PROGRESS) -> Listing:
        """List every file under the checkpoint once, recursively.

        Raises CheckpointNotFound for a missing location, NotACheckpoint for a file, and
        StorageAccessError when the store refuses the listing.
        """
        progress.start("Listing checkpoint")
        symlinks: dict[str, str] = {}
        try:
            if self._is_local:
                entries = list_local(self.root, self.url, self.stats, symlinks)
            else:
                self._count("list")
                entries = list_objects(self.fs, self.root, self.url, self.endpoint, self._strip)
        finally:
            progress.close()
        listing = Listing(entries, symlinks)
        self.use_listing(listing)
        return listing

    def use_listing(self, listing: Listing) -> None:
        """Take file sizes from ``listing``: streams then know where objects end."""
        if not self._is_local:
            self._sizes = {e.path: e.size for e in listing}

    # -- reading -------------------------------------------------------------------------

    def read_bytes(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """Read a checkpoint file (or a byte range of it): one GET, never a HEAD."""
        self.stats.files_read += 1
        if start is None and end is None and rel in self._prefetched:
            data = self._prefetched.pop(rel)
        else:
            data = self._get(rel, start, end)
        self.stats.bytes_read += len(data)
        return data

    def _get(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """One GET of a file or a byte range of it."""
        self._count("get")
        try:
            return bytes(self.fs.cat_file(self.full_path(rel), start=start, end=end))
        except Exception as exc:
            raise read_error(rel, exc) from exc

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

    @contextlib.contextmanager
    def open_stream(self, rel: str, *, header_only: bool = False) -> Iterator[CountingReader]:
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
            fh = RangedFile(functools.partial(self._get, rel), rel, size, block, head)
        else:
            self._count("get")
            try:
                fh = self.fs.open(self.full_path(rel), "rb")
            except Exception as exc:
                raise read_error(rel, exc) from exc
        try:
            yield CountingReader(fh, self.stats, rel)
        finally:
            fh.close()

    def read_pieces(self, rel: str) -> Iterator[bytes]:
        """A checkpoint file's bytes a piece at a time, streamed through :meth:`open_stream`
        (what :meth:`write_pieces` of another storage takes to copy it)."""
        with self.open_stream(rel) as stream:
            yield from _in_pieces(stream.read)

    @contextlib.contextmanager
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
        yield SeekableRangedFile(functools.partial(self._get, rel), size, self.stats)

    # -- writing, moving, deleting -------------------------------------------------------

    def write_bytes(self, rel: str, data: bytes, *, atomic: bool = False) -> None:
        """Write checkpoint file ``rel``, refused when it resolves outside the checkpoint.
        ``atomic``: on local disk through a temp file and a rename (Spark's own protocol);
        object stores put whole objects anyway."""
        self._put(self.contained(rel), data, atomic=atomic, name=rel)

    def write_bytes_absolute(
        self, location: str, data: bytes, *, within: str, atomic: bool = False
    ) -> None:
        """Write ``location`` (outside the checkpoint), refused unless it resolves in
        ``within`` (the quarantine). ``atomic``: a kill leaves the old content or the new,
        never a truncated file (the repair manifest)."""
        path = self.check_within(location, within, location)
        self._put(path, data, atomic=atomic, name=location)

    def _put(self, path: str, data: bytes, *, atomic: bool, name: str) -> None:
        self._count("put")
        try:
            if self._is_local:
                _write_local(path, (data,), atomic=atomic)
            else:
                self.fs.pipe_file(path, data)
        except Exception as exc:
            raise store_error(name, "write", exc, self.endpoint) from exc

    def write_file(self, rel: str, local: str, *, atomic: bool = False) -> None:
        """:meth:`write_bytes` from the local file ``local``, streamed (never held whole): on
        local disk copied a piece at a time (through a temp file and a rename when
        ``atomic``), on object stores uploaded as one object that appears only when
        complete."""
        path = self.contained(rel)
        self._count("put")
        try:
            if self._is_local:
                _write_local(path, _pieces(local), atomic=atomic)
            else:
                self.fs.put_file(local, path)
        except Exception as exc:
            raise store_error(rel, "write", exc, self.endpoint) from exc

    def write_pieces(self, rel: str, pieces: Iterable[bytes], *, atomic: bool = False) -> None:
        """:meth:`write_bytes` of ``pieces`` written as they come (a file copied from another
        storage, never held whole): on local disk through a temp file and a rename when
        ``atomic``, on object stores one object that appears only when complete."""
        path = self.contained(rel)
        self._count("put")
        try:
            if self._is_local:
                _write_local(path, pieces, atomic=atomic)
            else:
                with self.fs.open(path, "wb") as fh:
                    for piece in pieces:
                        fh.write(piece)
        except CkptError:
            raise
        except Exception as exc:
            raise store_error(rel, "write", exc, self.endpoint) from exc

    @contextlib.contextmanager
    def open_write(self, rel: str) -> Iterator[BinaryIO]:
        """A binary file for writing ``rel`` under this storage's root (parents created);
        one put. Refused when ``rel`` resolves outside the root; store errors name the
        file's URL."""
        path = self.contained(rel)
        where = f"{self.url.rstrip('/')}/{rel}"
        self._count("put")
        try:
            if self._is_local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fh = cast(BinaryIO, open(path, "wb"))  # noqa: SIM115 (closed below)
            else:
                fh = cast(BinaryIO, self.fs.open(path, "wb"))
        except Exception as exc:
            raise store_error(where, "write", exc, self.endpoint) from exc
        try:
            with fh:  # closing is what uploads, on object stores
                yield fh
        except CkptError:
            raise
        except Exception as exc:
            # The store's own failures in one line; the writer's bugs as they are.
            if isinstance(exc, OSError) or classify_store_error(exc)[0] != "other":
                raise store_error(where, "write", exc, self.endpoint) from exc
            raise

    def read_bytes_absolute(self, location: str) -> bytes:
        """A whole file given by URL or absolute path on this filesystem (a quarantined
        original)."""
        self._count("get")
        try:
            data: bytes = self.fs.cat_file(self._strip(location))
        except Exception as exc:
            raise store_error(redact_url(location), "read", exc, self.endpoint) from exc
        return data

    def read_text_absolute(self, location: str) -> str:
        """A UTF-8 file given by URL or absolute path on this filesystem (repair manifests)."""
        return self.read_bytes_absolute(location).decode("utf-8")

    def exists_absolute(self, location: str) -> bool:
        """Whether a file given by URL or absolute path on this filesystem exists (what an
        interrupted repair did or did not do)."""
        self._count("head")
        try:
            return bool(self.fs.exists(self._strip(location)))
        except Exception as exc:
            raise store_error(redact_url(location), "look for", exc, self.endpoint) from exc

    def write_text_absolute(self, location: str, text: str) -> None:
        """Write a file outside the checkpoint (a manifest), on the same filesystem unless
        ``location`` is a URL of another one."""
        import fsspec.core

        self._count("put")
        try:
            if "://" in location:
                with fsspec.core.open(location, "w", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                with self.fs.open(location, "w", encoding="utf-8") as fh:
                    fh.write(text)
        except Exception as exc:
            raise store_error(location, "write", exc, self.endpoint) from exc

    def create_new(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` holding ``data`` unless a file is there already (then False), in one
        atomic step so that of two processes only one wins: ``O_CREAT | O_EXCL`` on local
        disk, a conditional put on object stores (S3 ``If-None-Match: *``, Azure
        ``overwrite=False``)."""
        path = self.contained(rel)
        where = f"{self.url.rstrip('/')}/{rel}"
        self._count("put")
        try:
            if self._is_local:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                try:
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            else:
                self.fs.pipe_file(path, data, mode="create")
            return True
        except FileExistsError:
            return False
        except NotADirectoryError as exc:  # the root is a file
            raise not_a_directory(self.url) from exc
        except FileNotFoundError as exc:
            if self._is_local:
                raise CheckpointNotFound(f"{self.url}: no such file or directory") from exc
            raise store_error(where, "create it", exc, self.endpoint) from exc
        except Exception as exc:
            # S3 answers a lost race with 412 PreconditionFailed (or 409 ConditionalRequestConflict)
            text = str(exc)
            if isinstance(exc, OSError) and any(
                word in text for word in ("PreconditionFailed", "ConditionalRequestConflict")
            ):
                return False
            raise store_error(where, "create it", exc, self.endpoint) from exc

    def read_small(self, rel: str, limit: int) -> bytes | None:
        """The first ``limit`` bytes of ``rel``, None when there is no such file; one ranged
        GET (a plain one costs s3fs a HEAD first). For ckpt's own files (the lock), outside
        the listing."""
        self._count("get")
        try:
            return bytes(self.fs.cat_file(self.contained(rel), start=0, end=limit))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise store_error(
                f"{self.url.rstrip('/')}/{rel}", "read it", exc, self.endpoint
            ) from exc

    def move_out(self, rel: str, location: str, *, within: str) -> None:
        """Move checkpoint file ``rel`` to ``location`` in ``within`` (the quarantine). Both
        ends are checked: a file that resolves outside the checkpoint is never moved."""
        dest = self.check_within(location, within, location)
        self._move(self.contained(rel), dest, rel)

    def move_in(self, location: str, rel: str, *, within: str) -> None:
        """Move ``location`` (in the quarantine ``within``) back into the checkpoint as
        ``rel``."""
        src = self.check_within(location, within, location)
        self._move(src, self.contained(rel), location)

    def _move(self, src: str, dest: str, name: str) -> None:
        self._count("put")  # a rename locally; a copy and a delete on object stores
        if not self._is_local:
            self._count("delete")
        try:
            if self._is_local:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.replace(src, dest)
            else:
                self.fs.mv(src, dest)
        except FileNotFoundError as exc:
            raise StorageAccessError(f"{name}: no longer exists, cannot move it") from exc
        except Exception as exc:
            raise store_error(name, f"move it to {dest}", exc, self.endpoint) from exc

    def delete_tree(self, *, within: str) -> None:
        """Remove this storage's whole directory (ckpt's own staging), refused unless it
        resolves inside ``within``; already gone is not an error."""
        path = self.check_within(self.root, within, self.url)
        self._count("delete")
        try:
            if self._is_local:
                shutil.rmtree(path)
            else:
                self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise store_error(self.url, "delete", exc, self.endpoint) from exc

    def remove_empty_dir(self, location: str) -> bool:
        """Remove directory ``location`` (one ckpt made outside the checkpoint: a quarantine)
        when it is empty; whether it was. Object stores have no directories to remove."""
        if not self._is_local:
            return False
        try:
            os.rmdir(self._strip(location))
        except OSError:  # not empty, gone, or not a directory (a link)
            return False
        self._count("delete")
        return True

    def delete_many(self, rels: list[str]) -> int:
        """Delete checkpoint files; returns the requests made.

        S3 gets sequential multi-object deletes of up to 1000 keys (exactly ceil(n/1000)
        requests, :mod:`~ckpt_cli.storage.deletes`); other object stores one ``rm`` of the
        whole list (adlfs sends one DELETE per blob); local files are unlinked one by one, in
        order. A file already gone is not an error (an earlier, interrupted cleanup may have
        removed it).
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
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                self.stats.delete += len(paths)
                return len(paths)
            if is_s3(self.fs):
                self._count("delete", delete_s3_objects(self.fs, paths))
                return self.stats.delete - before
            self.fs.rm(paths)
        except FileNotFoundError:
            # Some filesystems (memory://) refuse the whole list for one path already gone.
            for path in paths:
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(path)
            self._count("delete", len(paths))  # the refused batch is counted below
        except Exception as exc:
            raise store_error(rels[0], "delete", exc, self.endpoint) from exc
        self._count("delete", -(-len(paths) // 1000))
        return self.stats.delete - before


def _pieces(local: str) -> Iterator[bytes]:
    # Plain reads (not sendfile): a piece at a time, whatever the size.
    with open(local, "rb") as src:
        yield from _in_pieces(src.read)


def _in_pieces(read: Callable[[int], bytes]) -> Iterator[bytes]:
    while piece := read(1 << 20):
        yield piece


def _write_local(path: str, pieces: Iterable[bytes], *, atomic: bool) -> None:
    parent, _, name = path.rpartition("/")
    os.makedirs(parent, exist_ok=True)
    target = f"{parent}/.{name}.{uuid.uuid4()}.tmp" if atomic else path
    with open(target, "wb") as fh:
        for piece in pieces:
            fh.write(piece)
    if atomic:
        os.replace(target, path)
