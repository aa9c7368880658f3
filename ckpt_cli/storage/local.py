"""Local paths without importing fsspec until an operation needs it.

Importing fsspec costs ~0.1 s of CPU and ~8 MB; local listings (``os.scandir``), reads and
writes go through ``os``, so ``ckpt versions`` or ``ckpt replay -O FILE`` on a local
checkpoint never needs it. Everything else (moves, deletes, writes in text mode...) reaches fsspec's
``LocalFileSystem``, made on first use.
"""

from __future__ import annotations

import os
from typing import Any

PROTOCOL_PREFIXES = ("file://", "local://", "file:", "local:")


def lazily_local(url: str) -> bool:
    """Whether ``url`` (a path or file:// URL, without storage options) can skip fsspec:
    POSIX paths, not a chained URL (``simplecache::file://...``)."""
    return os.sep == "/" and "::" not in url


class LazyLocalFileSystem:
    """fsspec's ``LocalFileSystem``, made on first use; paths resolved as it resolves them."""

    protocol = ("file", "local")

    def __init__(self) -> None:
        self._fs: Any = None

    @property
    def fs(self) -> Any:
        if self._fs is None:
            from fsspec.implementations.local import LocalFileSystem

            self._fs = LocalFileSystem()
        return self._fs

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_fs":  # pickling looks these up before __init__
            raise AttributeError(name)
        return getattr(self.fs, name)

    @staticmethod
    def _strip_protocol(path: str) -> str:
        """``LocalFileSystem._strip_protocol`` on POSIX: no scheme, absolute, no final /."""
        for prefix in PROTOCOL_PREFIXES:
            if path.startswith(prefix):
                path = path.removeprefix(prefix)
                break
        if path.startswith("~"):
            path = os.path.expanduser(path)
        elif not path.startswith("/"):
            path = path[2:] if path.startswith("./") else "" if path == "." else path
            path = f"{os.getcwd()}/{path}"
        return path.rstrip("/") or "/"

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """``LocalFileSystem.cat_file``: the bytes ``start:end`` (negative: from the end)."""
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if start is not None:
                fh.seek(start if start >= 0 else max(0, size + start))
            if end is None:
                return fh.read()
            end = end if end >= 0 else size + end
            return fh.read(max(0, end - fh.tell()))

    def exists(self, path: str) -> bool:
        return os.path.exists(self._strip_protocol(path))

    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if mode == "rb" and not kwargs:
            return open(path, "rb")  # noqa: SIM115 - the caller closes it
        return self.fs.open(path, mode, **kwargs)
