"""Records of the HDFS-backed store files and of state store changelogs (docs §3.2, §6).

After decompression (``compression.decompressed_chunks``) these files are Java
``DataOutputStream`` records:

* ``N.delta`` / ``N.snapshot`` and changelog V1 (every 3.5 changelog; 4.x without column
  families): ``int32 keySize | key | int32 valueSize | value``, ``valueSize = -1`` for a
  remove (deltas and changelogs only); ``keySize = -1`` ends the file.
* changelog V2 (column families): ``writeUTF("v2")`` then typed records
  ``byte type | int32 keySize | key | int32 valueSize | value`` with type 0x01 put, 0x10
  delete (valueSize -1), 0x11 merge; type 0x00 ends the file.
* changelog V3 / V4 (checkpoint format v2): ``writeUTF("v3"|"v4")``, ``writeUTF(lineage
  JSON)``, then V1 / V2 records.

A file that stops before its end marker is truncated (Spark fails reading it), which is
reported as ``TruncatedFileError`` rather than read as complete. Memory stays bounded by the
largest record: the decompressed stream is consumed chunk by chunk.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from ckpt_cli.errors import (
    FormatError,
    TruncatedFileError,
    UnsupportedVersionError,
    unsupported_hint,
)

PUT: Final = "put"
DELETE: Final = "delete"
MERGE: Final = "merge"

# Spark's RecordType.getRecordTypeAsByte.
_TYPED: Final = {0x01: PUT, 0x10: DELETE, 0x11: MERGE}
_EOF_RECORD: Final = 0x00

MAX_CHANGELOG_VERSION: Final = 4
# No state row comes near this; a larger length field is corruption, and refusing it bounds
# the memory a bogus length can make us buffer.
MAX_RECORD_BYTES: Final = 1 << 28

_INT = struct.Struct(">i")
_VERSION_HEADER = re.compile(rb"v(\d{1,4})")


@dataclass
class RecordColumns:
    """Records laid out in one buffer, by column: key ``i`` is
    ``data[key_offsets[i]:][:key_sizes[i]]``, its value likewise (numpy int64 arrays)."""

    data: bytes | bytearray
    key_offsets: Any
    key_sizes: Any
    value_offsets: Any
    value_sizes: Any

    def __len__(self) -> int:
        return len(self.key_offsets)


class LineageEntry(NamedTuple):
    """One ancestor ``(version, checkpointUniqueId)`` in a V3/V4 changelog's lineage."""

    version: int
    unique_id: str


@dataclass
class RecordStats:
    """Filled in while a file is read."""

    puts: int = 0
    deletes: int = 0
    merges: int = 0
    # Decompressed bytes up to and including the end marker.
    data_bytes: int = 0
    # Bytes after the end marker (Spark ignores them; non-zero hints at corruption).
    trailing_bytes: int = 0
    complete: bool = False

    @property
    def records(self) -> int:
        return self.puts + self.deletes + self.merges


class _Window:
    """A sliding window over decompressed chunks: ``buf[pos:]`` is unread, ``base`` is the
    stream offset of ``buf[0]``."""

    __slots__ = ("buf", "chunks", "pos", "base")

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = iter(chunks)
        self.buf = b""
        self.pos = 0
        self.base = 0

    def fill(self, need: int) -> bool:
        """Make ``need`` unread bytes available; False if the stream ends first."""
        while len(self.buf) - self.pos < need:
            chunk = next(self.chunks, None)
            if chunk is None:
                return False
            self.base += self.pos
            self.buf = self.buf[self.pos :] + chunk
            self.pos = 0
        return True

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def drain(self) -> int:
        """Count (and drop) everything left."""
        left = len(self.buf) - self.pos
        for chunk in self.chunks:
            left += len(chunk)
        self.buf, self.pos = b"", 0
        return left


def _check_size(path: str, size: int, what: str, at: int) -> None:
    if size > MAX_RECORD_BYTES:
        raise FormatError(
            path,
            f"{what} size {size} is larger than any state row "
            f"(limit {MAX_RECORD_BYTES} bytes) in the decompressed data",
            offset=at,
        )


def _truncated(path: str, records: int, at: int, win: _Window) -> TruncatedFileError:
    where = "inside a record" if len(win.buf) > win.pos else "at a record boundary"
    return TruncatedFileError(
        path,
        f"decompressed data ends {where} after {records} records, before the end-of-file "
        "marker: the file is truncated",
        offset=at,
    )


def _read_key(
    path: str, win: _Window, head: int, key_size: int, records: int, at: int
) -> tuple[bytes, int]:
    """The key and value size of the record at ``win.pos`` (offset ``at``): ``head`` bytes
    (its type byte, or none), the key size (``key_size``, read, >= 0), the key, the value size.
    ``records`` is the count before it (for the error of a truncated file)."""
    _check_size(path, key_size, "key", at + head)
    if not win.fill(head + 8 + key_size):
        raise _truncated(path, records, at, win)
    key_at = win.pos + head + 4
    (value_size,) = _INT.unpack_from(win.buf, key_at + key_size)
    return win.buf[key_at : key_at + key_size], value_size


def _read_value(
    path: str, win: _Window, head: int, key_size: int, value_size: int, records: int, at: int
) -> bytes | None:
    """The value of that record (None for a remove, value size -1), moving past the record."""
    before = head + 8 + key_size
    if value_size == -1:
        win.pos += before
        return None
    _check_size(path, value_size, "value", at + before - 4)
    if not win.fill(before + value_size):
        raise _truncated(path, records, at, win)
    start = win.pos + before
    win.pos = start + value_size
    return win.buf[start : win.pos]


def iter_kv_records(
    path: str,
    chunks: Iterable[bytes],
    *,
    snapshot: bool = False,
    stats: RecordStats | None = None,
) -> Iterator[tuple[bytes, bytes | None]]:
    """``(key, value)`` per record of a delta, snapshot or V1 changelog body; value None is a
    remove. ``snapshot=True`` rejects removes like Spark's snapshot reader does."""
    return _iter_kv(path, _Window(chunks), snapshot, stats or RecordStats())


def _iter_kv(
    path: str, win: _Window, snapshot: bool, stats: RecordStats
) -> Iterator[tuple[bytes, bytes | None]]:
    unpack = _INT.unpack_from
    puts = deletes = 0
    try:
        while True:
            buf, pos = win.buf, win.pos
            # Fast path: as many whole records as the current window holds.
            end = len(buf)
            while pos + 4 <= end:
                (key_size,) = unpack(buf, pos)
                if key_size < 0 or pos + 8 + key_size > end:
                    break
                key_end = pos + 4 + key_size
                (value_size,) = unpack(buf, key_end)
                if value_size < 0:
                    if value_size != -1 or snapshot:
                        break
                    deletes += 1
                    yield buf[pos + 4 : key_end], None
                    pos = key_end + 4
                    continue
                value_end = key_end + 4 + value_size
                if value_end > end:
                    break
                puts += 1
                yield buf[pos + 4 : key_end], buf[key_end + 4 : value_end]
                pos = value_end
            win.pos = pos
            # Slow path: one record that crosses chunks, the end marker, or an error.
            at = win.offset
            if not win.fill(4):
                raise _truncated(path, stats.records + puts + deletes, at, win)
            (key_size,) = unpack(win.buf, win.pos)
            if key_size == -1:
                win.pos += 4
                stats.data_bytes = win.offset
                stats.trailing_bytes = win.drain()
                stats.complete = True
                return
            if key_size < 0:
                raise FormatError(
                    path, f"key size {key_size} in the decompressed data (must be >= 0)", offset=at
                )
            records = stats.records + puts + deletes
            key, value_size = _read_key(path, win, 0, key_size, records, at)
            value_at = at + 4 + key_size
            if value_size < 0 and snapshot:
                raise FormatError(
                    path,
                    f"value size {value_size} in a snapshot (snapshots hold puts only)",
                    offset=value_at,
                )
            if value_size < -1:
                raise FormatError(
                    path,
                    f"value size {value_size} (must be >= 0, or -1 for a remove)",
                    offset=value_at,
                )
            value = _read_value(path, win, 0, key_size, value_size, records, at)
            if value is None:
                deletes += 1
            else:
                puts += 1
            yield key, value
    finally:
        stats.puts += puts
        stats.deletes += deletes


# -- changelogs ------------------------------------------------------------------------------


@dataclass
class Changelog:
    """An opened changelog: its header facts, then ``records()`` once."""

    path: str
    format_version: int
    lineage: tuple[LineageEntry, ...] | None
    stats: RecordStats = field(default_factory=RecordStats)
    _window: _Window | None = None

    @property
    def records_offset(self) -> int:
        """Where the records start in the decompressed file (after the header and lineage);
        readers that frame the records themselves (``replay/bulk``) start there."""
        if self._window is None:
            raise RuntimeError("the records were already read")
        return self._window.offset

    def records(self) -> Iterator[tuple[str, bytes, bytes | None]]:
        """``(type, key, value)``: type is put/delete/merge, value None for a delete."""
        win, self._window = self._window, None
        if win is None:
            raise RuntimeError("records() can be iterated once")
        if self.format_version in (1, 3):
            return (
                (PUT if v is not None else DELETE, k, v)
                for k, v in _iter_kv(self.path, win, False, self.stats)
            )
        return _iter_typed(self.path, win, self.stats)


def _read_utf(path: str, win: _Window, what: str) -> str:
    at = win.offset
    if not win.fill(2):
        raise TruncatedFileError(path, f"ends inside {what}", offset=at)
    (length,) = struct.unpack_from(">H", win.buf, win.pos)
    if not win.fill(2 + length):
        raise TruncatedFileError(path, f"ends inside {what} ({length} bytes announced)", offset=at)
    raw = win.buf[win.pos + 2 : win.pos + 2 + length]
    win.pos += 2 + length
    try:
        # Java's modified UTF-8 equals UTF-8 for the ASCII JSON Spark writes here.
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"{what} is not valid text ({exc.reason})", offset=at) from None


def _parse_lineage(path: str, text: str, at: int) -> tuple[LineageEntry, ...]:
    try:
        items = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, f"lineage is not JSON: {exc}", offset=at) from None
    if not isinstance(items, list):
        raise FormatError(path, "lineage must be a JSON list", offset=at)
    out: list[LineageEntry] = []
    for item in items:
        version = item.get("version") if isinstance(item, dict) else None
        unique_id = item.get("checkpointUniqueId") if isinstance(item, dict) else None
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not isinstance(unique_id, str)
        ):
            raise FormatError(
                path,
                'lineage entries must be {"version": <int>, "checkpointUniqueId": <string>}, '
                f"found {json.dumps(item)[:80]}",
                offset=at,
            )
        out.append(LineageEntry(version, unique_id))
    return tuple(out)


def open_changelog(path: str, chunks: Iterable[bytes]) -> Changelog:
    """Read a changelog's header (format version, lineage); records follow lazily.

    Version detection follows Spark's ``StateStoreChangelogReaderFactory``: a leading
    ``writeUTF("v<N>")`` names the version, anything else is a headerless V1 file.
    """
    win = _Window(chunks)
    version = 1
    if win.fill(3) and win.buf[win.pos] == 0:
        length = win.buf[win.pos + 1]
        if 2 <= length <= 5 and win.fill(2 + length):
            text = win.buf[win.pos + 2 : win.pos + 2 + length]
            match = _VERSION_HEADER.fullmatch(text)
            if match:
                version = int(match.group(1))
                if not 1 <= version <= MAX_CHANGELOG_VERSION:
                    raise UnsupportedVersionError(
                        path,
                        f"changelog format v{version} is unsupported "
                        f"(ckpt reads v1-v{MAX_CHANGELOG_VERSION})",
                        offset=0,
                        hint=unsupported_hint(),
                    )
                win.pos += 2 + length
    lineage = None
    if version in (3, 4):
        at = win.offset
        lineage = _parse_lineage(path, _read_utf(path, win, "the lineage line"), at)
    return Changelog(path, version, lineage, RecordStats(), win)


def _iter_typed(
    path: str, win: _Window, stats: RecordStats
) -> Iterator[tuple[str, bytes, bytes | None]]:
    unpack = _INT.unpack_from
    while True:
        at = win.offset
        if not win.fill(1):
            raise _truncated(path, stats.records, at, win)
        kind_byte = win.buf[win.pos]
        if kind_byte == _EOF_RECORD:
            win.pos += 1
            stats.data_bytes = win.offset
            stats.trailing_bytes = win.drain()
            stats.complete = True
            return
        kind = _TYPED.get(kind_byte)
        if kind is None:
            raise FormatError(
                path,
                f"unknown changelog record type 0x{kind_byte:02x} (expected 0x00 end, 0x01 put, "
                "0x10 delete, 0x11 merge)",
                offset=at,
            )
        if not win.fill(5):
            raise _truncated(path, stats.records, at, win)
        (key_size,) = unpack(win.buf, win.pos + 1)
        if key_size < 0:
            raise FormatError(path, f"key size {key_size} (must be >= 0)", offset=at + 1)
        key, value_size = _read_key(path, win, 1, key_size, stats.records, at)
        value_at = at + 5 + key_size
        if kind == DELETE and value_size != -1:
            raise FormatError(
                path,
                f"delete record with value size {value_size} (expected -1)",
                offset=value_at,
            )
        if kind != DELETE and value_size < 0:
            raise FormatError(path, f"{kind} record with value size {value_size}", offset=value_at)
        value = _read_value(path, win, 1, key_size, value_size, stats.records, at)
        if kind == PUT:
            stats.puts += 1
        elif kind == DELETE:
            stats.deletes += 1
        else:
            stats.merges += 1
        yield kind, key, value
