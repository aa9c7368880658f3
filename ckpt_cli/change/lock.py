"""The checkpoint lock: one ``cleanup --apply`` or ``repair --apply`` at a time.

The lock is the file ``.ckpt-lock`` at the checkpoint root, created atomically: ``O_CREAT |
O_EXCL`` on local disk, a conditional create on object stores (S3 ``PutObject`` with
``If-None-Match: *``, Azure ``upload_blob(overwrite=False)``, both through fsspec's
``pipe_file(mode="create")``). Spark never reads it (it opens ``metadata``, ``offsets/``,
``commits/``, ``sources/`` and ``state/`` by name), and ckpt classifies it as its own file.

It holds JSON ``{"holder": {"host", "pid", "command"}, "started": <ISO time>, "token"}`` and is
removed when the command ends, however it ends short of being killed.

Stale locks: a killed command leaves its lock. It is never broken silently; ``--break-lock``
removes it when its holder is provably gone: the holder ran on this host and its process no
longer exists, or the lock is older than ``STALE_AFTER_SECONDS`` (a holder on another host
cannot be checked). Otherwise the lock stays and the command fails naming the holder.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ckpt_cli.errors import (
    LockHeldError,
    StorageAccessError,
)
from ckpt_cli.formats.names import CKPT_LOCK_NAME as LOCK_NAME
from ckpt_cli.storage import Storage

__all__ = ["LOCK_NAME", "acquire", "checkpoint_lock", "read_lock", "release"]
STALE_AFTER_SECONDS = 12 * 3600.0


@dataclass
class LockInfo:
    host: str
    pid: int
    command: str
    started: float | None  # seconds since the epoch; None when unreadable
    token: str

    def age(self, now: float | None = None) -> float | None:
        if self.started is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.started)

    def holder_alive(self) -> bool | None:
        """True/False for a holder on this host, None when it ran elsewhere (unknowable)."""
        if self.host != socket.gethostname():
            return None
        return _pid_alive(self.pid)

    def stale(self, now: float | None = None) -> bool:
        alive = self.holder_alive()
        if alive is False:
            return True
        age = self.age(now)
        return alive is None and age is not None and age > STALE_AFTER_SECONDS

    def describe(self) -> str:
        age = self.age()
        when = "of unknown age" if age is None else f"taken {_human_age(age)} ago"
        return f"'{self.command}' (pid {self.pid} on {self.host}), {when}"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _human_age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _body(command: str, token: str) -> bytes:
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    holder = {"host": socket.gethostname(), "pid": os.getpid(), "command": command}
    return json.dumps({"holder": holder, "started": started, "token": token}).encode()


def _parse(data: bytes) -> LockInfo:
    try:
        obj = json.loads(data)
        holder = obj["holder"]
        started = _dt.datetime.fromisoformat(str(obj["started"])).timestamp()
        return LockInfo(
            str(holder["host"]), int(holder["pid"]), str(holder["command"]), started, obj["token"]
        )
    except (ValueError, KeyError, TypeError):
        return LockInfo("?", -1, "unknown (unreadable lock file)", None, "")


def read_lock(storage: Storage) -> LockInfo | None:
    """The lock's holder, or None when the checkpoint is not locked."""
    data = storage.read_small(LOCK_NAME, 64 << 10)  # lock files are a few hundred bytes
    return None if data is None else _parse(data)


def acquire(storage: Storage, command: str, *, break_lock: bool = False) -> str:
    """Take the lock for ``command``; returns its token. Raises LockHeldError naming the
    holder and its age when another command holds it (``break_lock``: unless it is stale)."""
    token = uuid.uuid4().hex
    data = _body(command, token)
    if storage.create_new(LOCK_NAME, data):
        return token
    held = read_lock(storage)
    if held is None and storage.create_new(LOCK_NAME, data):  # released in between
        return token
    if held is not None and break_lock and held.stale():
        # Only remove the lock that was judged stale, not one taken since.
        again = read_lock(storage)
        if again is None or again.token == held.token:
            storage.delete_many([LOCK_NAME])
        if storage.create_new(LOCK_NAME, data):
            return token
        held = read_lock(storage) or held
    if held is None:
        raise StorageAccessError(f"{LOCK_NAME}: cannot take the checkpoint lock")
    where = storage.display(LOCK_NAME)
    if held.stale():
        why = (
            "its process is gone"
            if held.holder_alive() is False
            else f"it is older than {STALE_AFTER_SECONDS / 3600:.0f} h"
        )
        hint = f"the lock looks stale ({why}): pass break_lock=True to remove it"
    else:
        hint = (
            f"wait for it to finish; if it was killed on another host, delete {where} "
            "by hand once you are sure it is gone"
        )
    raise LockHeldError(
        f"{storage.url}: locked by {held.describe()}: another change to it is running",
        hint=hint,
    )


def release(storage: Storage, token: str) -> None:
    """Remove the lock if it is still ours."""
    held = read_lock(storage)
    if held is not None and held.token == token:
        storage.delete_many([LOCK_NAME])


@contextmanager
def checkpoint_lock(storage: Storage, command: str, *, break_lock: bool = False) -> Iterator[None]:
    """Hold the checkpoint lock for the ``with`` block. Re-entrant on one Storage: a library
    call inside a CLI command that already holds it does not take it twice."""
    if storage.lock_token is not None:
        yield
        return
    token = acquire(storage, command, break_lock=break_lock)
    storage.lock_token = token
    try:
        yield
    finally:
        storage.lock_token = None
        release(storage, token)
