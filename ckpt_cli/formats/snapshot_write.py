"""The HDFS-backed state store's ``<version>.snapshot`` file, written.

``HDFSBackedStateStoreProvider.writeSnapshotFile`` (Spark 3.x-4.3) opens the file with
``CheckpointFileManager.createAtomic``, wraps it in ``CompressionCodec.compressedOutputStream``
of ``spark.sql.streaming.stateStore.compression.codec`` (``compressStream``) and a
``DataOutputStream``, then for every entry of the version's map writes
``int32 keySize | key bytes | int32 valueSize | value bytes`` (big-endian) and finally
``int32 -1``. Records are the bytes as they are stored: the key and value UnsafeRows, with the
value's ``[int32 LE crc]`` row checksum header when the store has them (the checksum covers
only the key and value, so a record can move to another partition unchanged). The reader
(``records.iter_kv_records(snapshot=True)``) refuses a ``valueSize`` of -1 in a snapshot.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from ckpt_cli.formats import compression
from ckpt_cli.formats.state_encoders import crc32c

_INT = struct.Struct(">i")
_END = _INT.pack(-1)
# Plain record bytes handed to the compressor at a time.
_BATCH_BYTES = 1 << 20


def snapshot_body(records: Iterable[tuple[bytes, bytes]]) -> Iterator[bytes]:
    """The decompressed bytes of a snapshot holding ``records``, in pieces."""
    pack = _INT.pack
    pending: list[bytes] = []
    size = 0
    for key, value in records:
        pending += (pack(len(key)), key, pack(len(value)), value)
        size += 8 + len(key) + len(value)
        if size >= _BATCH_BYTES:
            yield b"".join(pending)
            pending, size = [], 0
    pending.append(_END)
    yield b"".join(pending)


def encode_removals(keys: Iterable[bytes], codec: str = compression.LZ4) -> bytes:
    """A ``<version>.delta`` (or RocksDB ``<version>.changelog`` V1: the same bytes, docs
    §6) that removes ``keys``: ``[int32 keySize][key][int32 -1]`` each, then the end mark,
    compressed with ``codec``."""
    pack = _INT.pack
    body = b"".join(pack(len(key)) + key + _END for key in keys) + _END
    return b"".join(compression.compressed_chunks((body,), codec))


def hdfs_snapshot_chunks(
    records: Iterable[tuple[bytes, bytes]],
    codec: str = compression.LZ4,
    *,
    row_checksums: bool = False,
) -> Iterator[bytes]:
    """``encode_hdfs_snapshot`` in pieces, for files larger than memory should hold."""
    if row_checksums:
        records = ((key, with_hdfs_value_checksum(key, value)) for key, value in records)
    return compression.compressed_chunks(snapshot_body(records), codec)


def encode_hdfs_snapshot(
    records: Iterable[tuple[bytes, bytes]],
    codec: str = compression.LZ4,
    *,
    row_checksums: bool = False,
) -> bytes:
    """The bytes of ``<version>.snapshot`` holding ``records`` (key, value), in their order,
    compressed with ``codec`` (lz4, Spark's default; lzf, snappy or zstd). With
    ``row_checksums`` (``rowChecksum.enabled`` in the offsets' conf) the values are plain
    rows, as ``replay.read.iter_state`` gives them, and each gets its checksum header here;
    without it they are written as given."""
    return b"".join(hdfs_snapshot_chunks(records, codec, row_checksums=row_checksums))


def with_hdfs_value_checksum(key: bytes, value: bytes) -> bytes:
    """``value`` with the HDFS store's row checksum header (``rowChecksum.enabled``):
    ``[int32 LE CRC32C over key + value][value]``, the counterpart of
    ``state_encoders.strip_hdfs_value_checksum``."""
    return struct.pack("<i", crc32c(key, value)) + value
