"""Checksum sidecars of checkpoint files (docs §2.3), two unrelated kinds.

* Hadoop's hidden ``.<name>.crc`` (``ChecksumFileSystem``, local and HDFS-via-local paths):
  ``"crc\\0"``, ``int32 BE bytesPerChecksum``, then one ``int32 BE`` CRC-32 per chunk of the
  file. A stale one makes Hadoop refuse to read the file (``ChecksumException``).
* Spark 4.1+'s visible ``<name>.crc`` beside format-v2 state files: JSON
  ``{"algorithm":"CRC32C","value":<signed int32>,"mainFileSize":N,...}`` over the whole file.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import google_crc32c

from ckpt_cli.errors import FormatError

HADOOP_CRC_MAGIC = b"crc\x00"
_MAX_BYTES_PER_CHECKSUM = 1 << 24


@dataclass(frozen=True)
class HadoopCrc:
    bytes_per_checksum: int
    checksums: tuple[int, ...]

    def covers_size(self, size: int) -> bool:
        return len(self.checksums) == -(-size // self.bytes_per_checksum)


def parse_hadoop_crc(path: str, data: bytes) -> HadoopCrc:
    if not data.startswith(HADOOP_CRC_MAGIC):
        raise FormatError(
            path, f"expected Hadoop checksum magic 'crc\\0', found {data[:4]!r}", offset=0
        )
    if len(data) < 8:
        raise FormatError(path, "Hadoop checksum file ends inside its header", offset=4)
    (per,) = struct.unpack_from(">i", data, 4)
    if not 0 < per <= _MAX_BYTES_PER_CHECKSUM:
        raise FormatError(path, f"bytesPerChecksum {per} is not plausible", offset=4)
    body = data[8:]
    if len(body) % 4:
        raise FormatError(
            path, "Hadoop checksum file ends inside a checksum", offset=8 + len(body) // 4 * 4
        )
    return HadoopCrc(per, struct.unpack(f">{len(body) // 4}I", body))


def hadoop_crc_bytes(data: bytes, bytes_per_checksum: int = 512) -> bytes:
    """Hadoop's ``ChecksumFileSystem`` sidecar for ``data`` (CRC-32 per chunk)."""
    sums = [
        zlib.crc32(data[i : i + bytes_per_checksum])
        for i in range(0, len(data), bytes_per_checksum)
    ]
    return (
        HADOOP_CRC_MAGIC
        + struct.pack(">i", bytes_per_checksum)
        + struct.pack(f">{len(sums)}I", *sums)
    )


def verify_hadoop_crc(crc: HadoopCrc, data: bytes) -> str | None:
    """None if ``data`` matches, else what differs."""
    if not crc.covers_size(len(data)):
        return (
            f"covers {len(crc.checksums)} chunks of {crc.bytes_per_checksum} bytes, the file "
            f"has {len(data)} bytes"
        )
    per = crc.bytes_per_checksum
    for i, expected in enumerate(crc.checksums):
        if zlib.crc32(data[i * per : (i + 1) * per]) != expected:
            return f"chunk {i} (bytes {i * per}-{min(len(data), (i + 1) * per) - 1}) differs"
    return None


@dataclass(frozen=True)
class SparkChecksum:
    algorithm: str
    value: int
    main_file_size: int | None
    raw: dict[str, Any]


def parse_spark_checksum(path: str, data: bytes) -> SparkChecksum:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, f"checksum file is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FormatError(path, "checksum file must hold a JSON object")
    algorithm, value, size = obj.get("algorithm"), obj.get("value"), obj.get("mainFileSize")
    if not isinstance(algorithm, str) or isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(path, 'checksum file needs "algorithm" (string) and "value" (integer)')
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
        raise FormatError(path, '"mainFileSize" must be an integer')
    return SparkChecksum(algorithm, value, size, obj)


def spark_checksum_bytes(data: bytes, now_ms: int | None = None) -> bytes:
    """Spark's ``<name>.crc`` for ``data`` as ``ChecksumCheckpointFileManager`` writes it
    (``ChecksumFile.json``: fields in this order, the CRC32C as a signed int); the creator is
    the driver, as for files the maintenance thread uploads."""
    import time

    value = google_crc32c.value(data)
    obj = {
        "algorithm": "CRC32C",
        "value": value - (1 << 32) if value >= 1 << 31 else value,
        "mainFileSize": len(data),
        "timestampMs": int(time.time() * 1000) if now_ms is None else now_ms,
        "creator": {"executorId": "driver", "taskInfo": ""},
    }
    return json.dumps(obj, separators=(",", ":")).encode()


def verify_spark_checksum(checksum: SparkChecksum, data: bytes) -> str | None:
    """None if ``data`` matches, else what differs; unknown algorithms are reported."""
    if checksum.main_file_size is not None and checksum.main_file_size != len(data):
        return f"records a size of {checksum.main_file_size} bytes, the file has {len(data)}"
    if checksum.algorithm.upper() != "CRC32C":
        return f"algorithm {checksum.algorithm!r} is not one ckpt can verify"
    actual = google_crc32c.value(data)
    # Java stores the CRC as a signed int.
    if actual >= 1 << 31:
        actual -= 1 << 32
    if actual != checksum.value:
        return f"CRC32C {checksum.value} does not match the file's {actual}"
    return None
