"""RocksDB SST files (block-based tables) as Spark's state store writes them, decoded in bulk:
every record of a file as offsets into one buffer, with no Python object per record.

RocksDB's ``table/block_based/`` and ``table/format.{h,cc}`` define the layout; NOTES.md
("An SST reader for replay") records what was checked. Spark writes format_version 5
(``spark.sql.streaming.stateStore.rocksdb.formatVersion``): the fixtures of Spark 3.3-3.5
have CRC32C checksums and Snappy blocks, those of Spark 4.0-4.3 XXH3 and LZ4.

* the footer is the last 53 bytes: checksum type, the metaindex and index ``BlockHandle``
  (two varint64 each, zero-padded to 41 bytes), ``format_version`` (uint32) and the magic;
* each block is followed by a 5-byte trailer: compression type, then a 32-bit checksum of
  the block and that byte (XXH3's low 32 bits or masked CRC32C, each mixed with the type
  byte as ``ModifyChecksumForLastByte`` does); compressed blocks (format_version >= 2) start
  with the decompressed size as a varint32;
* a block is entries then an array of uint32 restart offsets and their count; an entry is
  ``shared, non_shared, value_length`` (varint32 each; index blocks of format_version >= 4
  omit the value length), then the key's non-shared bytes, then the value;
* data block keys are internal keys: the user key, then 8 bytes (``sequence << 8 | type``,
  little-endian), so the type is the first of them;
* the properties block (named in the metaindex) gives the comparator, index type, merge
  operand and range deletion counts, and the number of entries.

A DB whose tables' key ranges lie apart holds their records in turn (``db_records``);
tables whose ranges meet hold records that shadow each other by sequence number, RocksDB's
merge to make (``overlapping``). This is a fast path, not a second RocksDB: ``open_table``
returns None for anything it does not read (another footer or format version, a checksum
or compression it does not know, partitioned or hash indexes, range deletions, merge
operands, a data block hash index), and the caller then reads the DB with rocksdict. What
it does read it checks as RocksDB does: a block whose checksum differs, or whose entries do
not parse, is a ``FormatError`` naming the file and the block's offset.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cramjam
import google_crc32c
import lz4.block
import xxhash
import zstandard

from ckpt_cli.errors import FormatError
from ckpt_cli.formats.limits import Limits
from ckpt_cli.formats.records import RecordColumns

MAGIC = 0x88E241B785F4CFF7
FOOTER_BYTES = 53
BLOCK_TRAILER_BYTES = 5
# format_version 6 changed the footer and mixes each block's offset into its checksum.
FORMAT_VERSIONS = (2, 3, 4, 5)
BYTEWISE = b"leveldb.BytewiseComparator"

# ChecksumType and CompressionType (include/rocksdb/options.h, compression_type.h).
CRC32C, XXH3 = 1, 4
NO_COMPRESSION, SNAPPY, LZ4, LZ4HC, ZSTD = 0, 1, 4, 5, 7
# The ``rocksdb.compression`` property of a file whose blocks this module decompresses.
COMPRESSIONS = (b"NoCompression", b"Snappy", b"LZ4", b"LZ4HC", b"ZSTD")
# ValueType (db/dbformat.h): the record kinds a flushed state store holds.
DELETION, VALUE, SINGLE_DELETION = 0, 1, 7
KINDS = (DELETION, VALUE, SINGLE_DELETION)
_RANDOM_PRIME = 0x6B9083D9

# Bytes after a run of blocks: a varint or a key's window read at its end stays inside.
_PAD = 64
# Data blocks decoded at once: enough that per-call costs vanish, small enough for memory.
GROUP_BYTES = 1 << 18


@dataclass
class Records(RecordColumns):
    """Records of a run of data blocks, by column (a key is the user key); ``kinds`` holds
    each record's ValueType."""

    data: bytes
    kinds: Any
    # True where the user key is the record before's (an older sequence number of it).
    repeats: Any

    def key(self, i: int) -> bytes:
        at = int(self.key_offsets[i])
        return self.data[at : at + int(self.key_sizes[i])]


# A run of data blocks to its records: ``block_records``, or the replay kernel's.
BlockDecoder = Callable[[str, list[bytes]], Records]
# A run of data blocks read from the file and decoded in one call (the replay kernel's):
# ``(data, handles, checksum_type, most)`` to the records and the bytes decompressed, held
# to at most ``most``; None hands the run to ``read_blocks`` and the ``BlockDecoder``.
RunReader = Callable[[bytes, list[tuple[int, int]], int, int], "tuple[Records, int] | None"]


@dataclass
class Table:
    """An SST file this module reads: its bytes, checksum type, data blocks as
    ``(offset, size)``, the first and last user key, and the entry count its properties give."""

    path: str
    data: bytes
    checksum_type: int
    blocks: list[tuple[int, int]]
    entries: int
    first_key: bytes
    last_key: bytes
    _decoded: int = 0

    def records(
        self,
        group_bytes: int = GROUP_BYTES,
        decode: BlockDecoder | None = None,
        read: RunReader | None = None,
    ) -> Iterator[Records]:
        """The table's records in key order, a run of data blocks at a time (read by
        ``read`` where it takes the run, else by ``read_blocks`` and ``decode``, by default
        ``block_records``)."""
        decode = decode or block_records
        start, size, seen, last = 0, 0, 0, b""
        for i, (_, block_size) in enumerate(self.blocks):
            size += block_size
            if size >= group_bytes or i == len(self.blocks) - 1:
                got = self._run(self.blocks[start : i + 1], decode, read)
                if seen and got.key(0) == last:
                    got.repeats[0] = True
                seen += len(got)
                last = got.key(len(got) - 1)
                yield got
                start, size = i + 1, 0
        if seen != self.entries:
            raise FormatError(
                self.path, f"{seen} entries in the data blocks, the properties say {self.entries}"
            )

    def _run(
        self, handles: list[tuple[int, int]], decode: BlockDecoder, read: RunReader | None
    ) -> Records:
        if read is not None:
            most = Limits.current().allowed(len(self.data)) - self._decoded
            found = read(self.data, handles, self.checksum_type, most)
            if found is not None:
                records, decompressed = found
                self._decoded += decompressed
                return records
        return decode(self.path, self.read_blocks(handles))

    def read_blocks(self, handles: list[tuple[int, int]]) -> list[bytes]:
        """The blocks at ``handles``, checked and decompressed within the limits (all of a
        file's blocks together are held to them against the file's size)."""
        path, data, checksum_type = self.path, self.data, self.checksum_type
        limits = Limits.current()
        allowed = limits.allowed(len(data))
        blocks = [read_block(path, data, at, size, checksum_type, allowed) for at, size in handles]
        self._decoded += sum(map(len, blocks))
        if self._decoded > allowed:
            limits.check_inflation(path, len(data), self._decoded, "the SST's blocks")
        return blocks


def _varint(data: bytes, pos: int, path: str, limit: int = 10) -> tuple[int, int]:
    value = shift = 0
    for i in range(limit):
        if pos + i >= len(data):
            raise FormatError(path, "varint runs past its block", offset=pos)
        byte = data[pos + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + i + 1
        shift += 7
    raise FormatError(path, "varint longer than its type", offset=pos)


def block_checksum(kind: int, block: bytes, last_byte: int) -> int | None:
    """The trailer's checksum of ``block`` followed by ``last_byte`` (its compression type),
    or None for a checksum type this module does not compute."""
    if kind == XXH3:
        low = int(xxhash.xxh3_64_intdigest(block)) & 0xFFFFFFFF
        return low ^ ((last_byte * _RANDOM_PRIME) & 0xFFFFFFFF)
    if kind == CRC32C:
        crc = int(google_crc32c.extend(google_crc32c.value(block), bytes((last_byte,))))
        return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    return None


def read_block(
    path: str, data: bytes, offset: int, size: int, checksum_type: int, most: int | None = None
) -> bytes:
    """The block at ``offset`` (``size`` bytes before its trailer), checked and decompressed
    to at most ``most`` bytes (by default what the limits allow the file's size), a
    LimitExceededError past them."""
    end = offset + size
    if offset < 0 or end + BLOCK_TRAILER_BYTES > len(data):
        raise FormatError(path, f"block of {size} bytes runs past the file's end", offset=offset)
    block = data[offset:end]
    compression = data[end]
    (stored,) = struct.unpack_from("<I", data, end + 1)
    if block_checksum(checksum_type, block, compression) != stored:
        raise FormatError(path, "block checksum mismatch", offset=offset)
    if compression == NO_COMPRESSION:
        return block
    # Snappy's raw format starts with the decompressed size itself; the others are given
    # it as a varint32 before their data (compress_format_version 2).
    raw_size, at = _varint(block, 0, path, 5)
    if compression == SNAPPY:
        at = 0
    if most is None:
        most = Limits.current().allowed(len(data))
    if raw_size > most:
        Limits.current().check_inflation(path, len(data), raw_size, "an SST block", declared=True)
        raise FormatError(path, f"block declares {raw_size} bytes", offset=offset)
    try:
        if compression in (LZ4, LZ4HC):
            out = lz4.block.decompress(block[at:], uncompressed_size=raw_size)
        elif compression == SNAPPY:
            out = cramjam.snappy.decompress_raw(block)
        elif compression == ZSTD:
            out = zstandard.ZstdDecompressor().decompress(block[at:], max_output_size=raw_size)
        else:
            raise FormatError(path, f"block compression type {compression}", offset=offset)
    except FormatError:
        raise
    except Exception as exc:  # the codecs raise their own error types
        raise FormatError(path, f"block does not decompress: {exc}", offset=offset) from None
    if len(out) != raw_size:
        raise FormatError(path, f"block decompresses to {len(out)} bytes, not {raw_size}")
    return bytes(out)


def _intervals(path: str, buf: bytes, sizes: list[int]) -> tuple[Any, Any, Any]:
    """For blocks laid end to end in ``buf`` with these ``sizes``: where each block's entries
    end, and where each restart interval starts and stops (offsets into ``buf``)."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    size = np.asarray(sizes, np.int64)
    base = np.cumsum(size) - size
    if (size < 4).any():
        raise FormatError(path, "block shorter than its restart count")
    count = _uint32s(u8, base + size - 4)
    if (count >> 31).any():
        # open_table leaves such tables to rocksdb (their first and last blocks tell).
        raise FormatError(path, "a data block with a hash index, which this reader does not read")
    end = size - 4 - 4 * count
    if (count == 0).any() or (end < 0).any():
        raise FormatError(path, "block too short for its restart count")
    block = np.repeat(np.arange(len(size)), count)
    first = np.cumsum(count) - count
    at = base[block] + end[block] + 4 * (np.arange(len(block)) - first[block])
    starts = _uint32s(u8, at)
    stops = np.empty_like(starts)
    stops[:-1] = starts[1:]
    last = first + count - 1
    stops[last] = end
    if (starts[first] != 0).any() or (stops <= starts).any():
        raise FormatError(path, "block restart offsets out of order or out of range")
    return base + end, starts + base[block], stops + base[block]


def _uint32s(u8: Any, at: Any) -> Any:
    import numpy as np

    out = u8[at].astype(np.int64)
    for i in (1, 2, 3):
        out |= u8[at + i].astype(np.int64) << (8 * i)
    return out


def block_entries(path: str, block: bytes) -> list[tuple[bytes, bytes]]:
    """A small block's ``(key, value)`` entries, one at a time (metaindex, properties)."""
    ends, _, _ = _intervals(path, block, [len(block)])
    end = int(ends[0])
    out: list[tuple[bytes, bytes]] = []
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos, path, 5)
        non_shared, pos = _varint(block, pos, path, 5)
        value_size, pos = _varint(block, pos, path, 5)
        if shared > len(key) or pos + non_shared + value_size > end:
            raise FormatError(path, "block entry runs past its block", offset=pos)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        out.append((key, block[pos : pos + value_size]))
        pos += value_size
    return out


def index_handles(path: str, block: bytes, delta_values: bool) -> list[tuple[int, int]]:
    """The data blocks' ``(offset, size)`` an index block names, in order. RocksDB writes
    an index entry per restart (``index_block_restart_interval`` 1), each holding a whole
    ``BlockHandle``; with ``delta_values`` (format_version >= 4) an entry has no value
    length (``IndexValue::EncodeTo``)."""
    import numpy as np

    _, starts, stops = _intervals(path, block, [len(block)])
    u8 = np.frombuffer(block + bytes(16), np.uint8)
    try:
        shared, at = _varints(u8, starts)
        non_shared, at = _varints(u8, at)
        if not delta_values:
            _, at = _varints(u8, at)
        at = at + non_shared
        offset, at = _varints(u8, at, 10)
        size, at = _varints(u8, at, 10)
    except _BadEntry as exc:
        raise FormatError(path, f"index block does not parse: {exc}") from None
    if shared.any():
        raise FormatError(path, "index block does not parse: an entry at a restart shares a prefix")
    if (at != stops).any():
        if (at < stops).all():
            raise _Unsupported("index entries between restarts")
        raise FormatError(path, "index block does not parse: an entry runs past its interval")
    return list(zip(offset.tolist(), size.tolist(), strict=True))


_SKIPPED_META = (b"filter.", b"fullfilter.")


class _Unsupported(Exception):
    """A feature this module leaves to rocksdict."""


def open_table(path: str, data: bytes, decode: BlockDecoder | None = None) -> Table | None:
    """The SST ``data`` (a whole file, ``path`` naming it), or None when it uses something
    this module does not read. A file that is not an SST at all is a FormatError. Its first
    and last data blocks are decoded by ``decode`` (by default ``block_records``)."""
    try:
        return _open(path, data, decode or block_records)
    except _Unsupported:
        return None


def _open(path: str, data: bytes, decode: BlockDecoder) -> Table:
    if len(data) < FOOTER_BYTES:
        raise FormatError(path, f"{len(data)} bytes cannot hold an SST footer")
    footer = len(data) - FOOTER_BYTES
    version, magic = struct.unpack_from("<IQ", data, len(data) - 12)
    if magic != MAGIC:
        raise FormatError(path, "not a block-based SST (no magic number at its end)")
    if version not in FORMAT_VERSIONS:
        raise _Unsupported(f"format_version {version}")
    checksum_type = data[footer]
    if block_checksum(checksum_type, b"", 0) is None:
        raise _Unsupported(f"checksum type {checksum_type}")
    pos = footer + 1
    meta_at, pos = _varint(data, pos, path)
    meta_size, pos = _varint(data, pos, path)
    index_at, pos = _varint(data, pos, path)
    index_size, pos = _varint(data, pos, path)
    meta = dict(block_entries(path, read_block(path, data, meta_at, meta_size, checksum_type)))
    # Filters only skip blocks for lookups; a compression dictionary, range deletions or a
    # hash index would change what the data blocks mean.
    if any(not name.startswith(_SKIPPED_META) for name in meta if name != b"rocksdb.properties"):
        raise _Unsupported("meta blocks other than properties and filters")
    props_handle = meta.get(b"rocksdb.properties")
    if not isinstance(props_handle, bytes):
        raise _Unsupported("no properties block")
    at, p = _varint(props_handle, 0, path)
    size, _ = _varint(props_handle, p, path)
    props = dict(block_entries(path, read_block(path, data, at, size, checksum_type)))

    def number(name: str) -> int:
        value = props.get(b"rocksdb." + name.encode())
        if not isinstance(value, bytes):
            raise _Unsupported(f"no {name} property")
        return _varint(value, 0, path)[0]

    if props.get(b"rocksdb.compression") not in COMPRESSIONS:
        raise _Unsupported("a compression other than Snappy, LZ4 and ZSTD")
    if props.get(b"rocksdb.comparator") != BYTEWISE:
        raise _Unsupported("a comparator other than bytewise")
    # BlockBasedTablePropertyNames::kIndexType is a fixed32; 0 is kBinarySearch.
    if props.get(b"rocksdb.block.based.table.index.type") != bytes(4):
        raise _Unsupported("an index other than binary search")
    if number("merge.operands") or number("num.range-deletions"):
        raise _Unsupported("merge operands or range deletions")
    delta_values = version >= 4 and number("index.value.is.delta.encoded")
    index = read_block(path, data, index_at, index_size, checksum_type)
    blocks = index_handles(path, index, bool(delta_values))
    expected = 0
    for offset, size in blocks:
        # Data blocks lie end to end from the file's start (BlockBasedTableBuilder).
        if offset != expected:
            raise FormatError(path, "index names data blocks out of order", offset=offset)
        expected = offset + size + BLOCK_TRAILER_BYTES
    entries = number("num.entries")
    first = last = b""
    if blocks:
        outer = [read_block(path, data, *blocks[i], checksum_type) for i in (0, -1)]
        if any(len(b) >= 4 and b[-1] >> 7 for b in outer):  # the restart count's top bit
            raise _Unsupported("a data block hash index")
        head, tail = (decode(path, [b]) for b in outer)
        first, last = head.key(0), tail.key(len(tail) - 1)
    return Table(path, data, checksum_type, blocks, entries, first, last)


def _varints(u8: Any, at: Any, most: int = 5) -> tuple[Any, Any]:
    """The varint (of at most ``most`` bytes) at each of ``at`` in ``u8`` (padded past its
    end) and where each ends."""
    import numpy as np

    first = u8[at]
    if (first < 0x80).all():
        return first.astype(np.int64), at + 1
    value = (first & 0x7F).astype(np.int64)
    end = at + 1
    more = np.flatnonzero(first >= 0x80)
    for shift in range(7, 7 * most, 7):
        byte = u8[end[more]]
        value[more] |= (byte & 0x7F).astype(np.int64) << shift
        end[more] += 1
        more = more[byte >= 0x80]
        if not len(more):
            return value, end
    raise _BadEntry(f"a varint longer than {most} bytes")


class _BadEntry(Exception):
    pass


def block_records(path: str, blocks: list[bytes]) -> Records:
    """The entries of consecutive data blocks, decoded together: every restart interval is
    walked at once, an entry per step, and each key rebuilt from the one before it (its
    shared prefix) and its own bytes."""
    import numpy as np

    sizes = [len(b) for b in blocks]
    # Padded so that a varint, or a key's window (below), read near the end stays inside.
    buf = b"".join([*blocks, bytes(_PAD)])
    _, pos, stop = _intervals(path, buf, sizes)
    u8 = np.frombuffer(buf, np.uint8)
    n = len(pos)
    steps: list[tuple[Any, Any, Any, Any, Any]] = []
    counts = np.zeros(n, np.int64)
    stayed: list[Any] = []
    active = np.arange(n, dtype=np.int64)
    try:
        while len(active):
            at = pos[active]
            shared, at = _varints(u8, at)
            non_shared, at = _varints(u8, at)
            value_size, at = _varints(u8, at)
            after = at + non_shared + value_size
            limit = stop[active]
            if (after > limit).any():
                raise _BadEntry("an entry runs past its restart interval")
            if not steps and shared.any():
                raise _BadEntry("an entry at a restart shares a prefix")
            steps.append((active, shared, non_shared, value_size, at))
            counts[active] += 1
            pos[active] = after
            stayed.append(after < limit)
            active = active[stayed[-1]]
    except _BadEntry as exc:
        raise FormatError(path, f"data block does not parse: {exc}") from None
    first = np.cumsum(counts) - counts
    total = int(counts.sum())
    key_sizes = np.zeros(total, np.int64)
    value_offsets = np.zeros(total, np.int64)
    value_sizes = np.zeros(total, np.int64)
    # An entry repeats the user key before it (an older sequence number of that key) when
    # only its 8-byte trailer differs; entries at a restart share nothing, and are compared.
    repeats = np.zeros(total, bool)
    for j, (active, shared, non_shared, value_size, at) in enumerate(steps):
        entry = first[active] + j
        key_sizes[entry] = shared + non_shared
        value_offsets[entry] = at + non_shared
        value_sizes[entry] = value_size
        if j:
            size = key_sizes[entry]
            repeats[entry] = (size == key_sizes[entry - 1]) & (shared >= size - 8)
    if (key_sizes < 8).any():
        raise FormatError(path, "data block does not parse: a key shorter than its 8-byte trailer")
    # Keys are rebuilt as rows of a byte matrix, a step at a time: each row starts as the
    # bytes from where its non-shared part would begin were it whole (a window of the
    # buffer), and its shared prefix is taken from the row before (the entry before it).
    # Bytes past a key's end are left as they fall: only its own length is ever read.
    # Rows of a multiple of 8 bytes are gathered as items of that size (a copy each).
    width = -(-int(key_sizes.max()) // 8) * 8 if total else 8
    if width > _PAD:
        buf += bytes(width)
    windows = np.ndarray((len(buf) - width + 1,), f"V{width}", buf, strides=(1,))
    # The rows of the entries before a step's are the step before's, less the intervals
    # ended; keys are placed in record order (decoding them later reads them in order).
    keys = np.empty((total, width), np.uint8)
    key_offsets = np.arange(total, dtype=np.int64) * width
    column = np.arange(width)
    before: Any = None
    for j, (active, shared, _, _, at) in enumerate(steps):
        entry = first[active] + j
        if j and (shared > key_sizes[entry - 1]).any():
            raise FormatError(
                path, "data block does not parse: a key shares more than the key before it"
            )
        rows = windows[at - shared].view(np.uint8).reshape(len(active), width)
        if j:
            kept = before[stayed[j - 1]]
            # Most keys share about as much as the others: the bytes every row shares are
            # one copy, and only those some rows share are picked byte by byte.
            low, high = int(shared.min()), int(shared.max())
            rows[:, :low] = kept[:, :low]
            if high > low:
                np.copyto(
                    rows[:, low:high],
                    kept[:, low:high],
                    where=column[low:high] < shared[:, None],
                )
        keys[entry] = rows
        before = rows
    flat = keys.reshape(-1)
    kinds = flat[key_offsets + key_sizes - 8]
    if not np.isin(kinds, KINDS).all():
        kind = int(kinds[~np.isin(kinds, KINDS)][0])
        raise FormatError(path, f"record type {kind}: neither a put nor a delete")
    restart = first[1:]
    same = restart[key_sizes[restart] == key_sizes[restart - 1]]
    if len(same):
        mine, theirs = keys[same], keys[same - 1]
        past = column >= (key_sizes[same] - 8)[:, None]
        repeats[same] = ((mine == theirs) | past).all(axis=1)
    return Records(
        b"".join((keys.data, buf)),
        key_offsets,
        key_sizes - 8,
        value_offsets + keys.nbytes,
        value_sizes,
        kinds,
        repeats,
    )


def db_records(
    tables: list[Table],
    group_bytes: int = GROUP_BYTES,
    decode: BlockDecoder | None = None,
    read: RunReader | None = None,
) -> Iterator[Records]:
    """The records of a DB made of ``tables`` whose key ranges lie apart (``overlapping``
    false), in key order: each table's in turn, a run of blocks at a time, its bytes let go
    once read. Each user key's newest record comes first (a delete included: the caller
    drops it, and the older ones ``repeats`` marks). Runs are of ``group_bytes`` of blocks,
    decoded by ``decode`` (``block_records``, or the same done by the replay kernel), or
    read and decoded by ``read`` (the kernel's, for what it takes)."""
    if overlapping(tables):
        raise ValueError("tables whose key ranges meet need RocksDB's merge")
    tables = sorted(tables, key=lambda t: t.first_key)
    while tables:
        yield from tables.pop(0).records(group_bytes, decode, read)


def overlapping(tables: list[Table]) -> bool:
    """Whether two of ``tables`` may hold the same user key (their ranges meet): the DB's
    state is then a merge of their records by sequence number, left to RocksDB (sorting
    them all in numpy took twice as long as rocksdict; NOTES.md)."""
    ordered = sorted(tables, key=lambda t: t.first_key)
    return any(a.last_key >= b.first_key for a, b in itertools.pairwise(ordered))
