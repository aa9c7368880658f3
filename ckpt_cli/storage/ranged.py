"""File objects over ranged GETs of an object whose size the listing gave: opening one costs
no request (no HEAD), and each read fetches only the bytes it needs."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from ckpt_cli.errors import StorageAccessError
from ckpt_cli.storage.stats import StorageStats

STREAM_BLOCK = 8 << 20
HEADER_BLOCK = 64 << 10  # a changelog's version and lineage lines, compressed, fit easily

# One GET of bytes [start, end) of the object.
GetRange = Callable[[int, int], bytes]


class RangedFile:
    """Sequential reads of an object in ranged GETs of STREAM_BLOCK bytes, size known."""

    def __init__(
        self, get: GetRange, rel: str, size: int, first_block: int, head: bytes = b""
    ) -> None:
        self._block = first_block  # grows to STREAM_BLOCK after the first request
        self._get = get
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
            block = self._get(self._pos, end)
            if not block:
                break  # the object shrank since the listing: the reader reports truncation
            self._pos += len(block)
            self._buf += block
        out, self._buf = self._buf[:n], self._buf[n:]
        return bytes(out)

    def close(self) -> None:
        self._buf = b""


class SeekableRangedFile(io.RawIOBase):
    """Random reads of an object by ranged GETs of at least HEADER_BLOCK bytes, kept: a zip's
    central directory (the last HEADER_BLOCK bytes, fetched up front) and then its members."""

    def __init__(self, get: GetRange, size: int, stats: StorageStats) -> None:
        super().__init__()
        self._get = get
        self._stats = stats
        self._size = size
        self._pos = 0
        self._spans: list[tuple[int, bytes]] = []
        self._fetch(max(0, size - HEADER_BLOCK), size)

    def _fetch(self, start: int, end: int) -> bytes:
        data = self._get(start, end)
        self._stats.bytes_read += len(data)
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


class CountingReader:
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
