"""Writes and moves for ``ckpt repair``, over the same filesystem as the checkpoint.

Kept beside :mod:`ckpt_cli.storage` (which reads, lists and deletes) because only repair
changes files in place; paths outside the checkpoint (the quarantine) are absolute paths or
URLs on the checkpoint's filesystem.
"""

from __future__ import annotations

import os
import uuid

from ckpt_cli.errors import StorageAccessError
from ckpt_cli.storage import Storage, store_error


def _count(storage: Storage, kind: str) -> None:
    # Object stores with a hooked client count their own requests.
    if not storage._counted_by_client:
        setattr(storage.stats, kind, getattr(storage.stats, kind) + 1)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _strip_protocol(storage: Storage, location: str) -> str:
    if "://" in location:
        return str(storage.fs._strip_protocol(location))
    return location


def write_bytes(storage: Storage, rel: str, data: bytes, *, atomic: bool = False) -> None:
    """Write a checkpoint file. ``atomic``: on local disk, through a temp file and a rename
    (Spark's own protocol); object stores put whole objects anyway. Refused when ``rel``
    resolves outside the checkpoint."""
    path = storage.contained(rel)
    _count(storage, "put")
    try:
        if storage.is_local:
            os.makedirs(_parent(path), exist_ok=True)
            if atomic:
                tmp = f"{_parent(path)}/.{path.rsplit('/', 1)[-1]}.{uuid.uuid4()}.tmp"
                with open(tmp, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path)
                return
            with open(path, "wb") as fh:
                fh.write(data)
            return
        storage.fs.pipe_file(path, data)
    except Exception as exc:
        raise store_error(rel, "write", exc, storage.endpoint) from exc


def write_bytes_absolute(
    storage: Storage, location: str, data: bytes, *, within: str, atomic: bool = False
) -> None:
    """Write ``location`` (outside the checkpoint), refused unless it resolves in ``within``
    (the quarantine). ``atomic``: on local disk through a temp file and a rename, so a kill
    leaves the old content or the new, never a truncated file (the repair manifest)."""
    path = storage.check_within(_strip_protocol(storage, location), within, location)
    _count(storage, "put")
    try:
        if storage.is_local:
            os.makedirs(_parent(path), exist_ok=True)
            if atomic:
                tmp = f"{_parent(path)}/.{path.rsplit('/', 1)[-1]}.{uuid.uuid4()}.tmp"
                with open(tmp, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path)
                return
        storage.fs.pipe_file(path, data)
    except Exception as exc:
        raise store_error(location, "write", exc, storage.endpoint) from exc


def read_bytes_absolute(storage: Storage, location: str) -> bytes:
    _count(storage, "get")
    try:
        data: bytes = storage.fs.cat_file(_strip_protocol(storage, location))
    except Exception as exc:
        raise store_error(location, "read", exc, storage.endpoint) from exc
    return data


def exists_absolute(storage: Storage, location: str) -> bool:
    _count(storage, "head")
    try:
        return bool(storage.fs.exists(_strip_protocol(storage, location)))
    except Exception as exc:
        raise store_error(location, "look for", exc, storage.endpoint) from exc


def move_out(storage: Storage, rel: str, location: str, *, within: str) -> None:
    """Move a checkpoint file to ``location`` in ``within`` (the quarantine). Both ends are
    checked: a file that resolves outside the checkpoint is never moved."""
    dest = storage.check_within(_strip_protocol(storage, location), within, location)
    _move(storage, storage.contained(rel), dest, rel)


def move_in(storage: Storage, location: str, rel: str, *, within: str) -> None:
    """Move ``location`` (in the quarantine ``within``) back into the checkpoint as ``rel``."""
    src = storage.check_within(_strip_protocol(storage, location), within, location)
    _move(storage, src, storage.contained(rel), location)


def _move(storage: Storage, src: str, dest: str, name: str) -> None:
    _count(storage, "put")  # a rename locally; a copy and a delete on object stores
    if not storage.is_local:
        _count(storage, "delete")
    try:
        if storage.is_local:
            os.makedirs(_parent(dest), exist_ok=True)
            os.replace(src, dest)
        else:
            storage.fs.mv(src, dest)
    except FileNotFoundError as exc:
        raise StorageAccessError(f"{name}: no longer exists, cannot move it") from exc
    except Exception as exc:
        raise store_error(name, f"move it to {dest}", exc, storage.endpoint) from exc
