"""Decompression bombs built from real fixture files, in about a second each.

Each bomb keeps the real file's framing and records, then repeats its first record (a real,
decodable row) in the same codec, so every reader gets far before anything looks wrong:

* zstd: the records in one frame, streamed through the compressor a MiB at a time (4 GiB
  in ~1.5 s, ~400 KB); ``zstd_zeros`` makes a frame of hand-made RLE blocks instead;
* lz4: lz4-java ``LZ4Block`` blocks of ~32 MiB of repeated records (~130 KB each), all
  identical;
* zip: the real ``<v>.zip`` entries plus one deflated entry of zeros, deflated once per MiB
  with a full flush so every MiB after the first has the same bytes.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import lz4.block
import xxhash
import zstandard

from ckpt_cli.formats import compression

_ZSTD_BLOCK = 128 << 10
_LZ4_BLOCK = 32 << 20
_MIB = 1 << 20


def _records_without_end(path: Path) -> tuple[bytes, bytes]:
    """The file's records without the end marker, and its first record."""
    plain = compression.decompress(str(path), path.read_bytes())
    assert plain.endswith(b"\xff\xff\xff\xff"), "expected a delta/snapshot end marker"
    (key_size,) = struct.unpack_from(">i", plain, 0)
    (value_size,) = struct.unpack_from(">i", plain, 4 + key_size)
    return plain[:-4], plain[: 8 + key_size + value_size]


def _repeated(record: bytes, size: int) -> bytes:
    return record * (size // len(record))


def zstd_zeros(size: int) -> bytes:
    """One zstd frame of ``size`` zero bytes, made of RLE blocks."""
    assert size % _ZSTD_BLOCK == 0
    # No content size, window 128 KiB (Window_Descriptor exponent 7).
    out = bytearray(compression.ZSTD_MAGIC + b"\x00" + bytes([7 << 3]))
    blocks = size // _ZSTD_BLOCK
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        header = last | (1 << 1) | (_ZSTD_BLOCK << 3)  # Block_Type 1: RLE
        out += header.to_bytes(3, "little") + b"\x00"
    return bytes(out)


def zstd_compress(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=1).compress(data)


def zstd_bomb(real: Path, inflated: int = 4 << 30) -> bytes:
    """The real file's records, then ~``inflated`` bytes of its first record, one zstd frame."""
    records, first = _records_without_end(real)
    packer = zstandard.ZstdCompressor(level=1).compressobj()
    unit = _repeated(first, _MIB)
    out = [packer.compress(records)]
    for _ in range(inflated // len(unit)):
        out.append(packer.compress(unit))
    out.append(packer.flush())
    return b"".join(out)


def lz4_bomb(real: Path, inflated: int = 6 << 30) -> bytes:
    """The real file's records as lz4-java blocks, then ~``inflated`` bytes of its first
    record in blocks of ~32 MiB (the largest lz4-java writes), then the end mark."""
    records, first = _records_without_end(real)
    head = compression.compress(records, compression.LZ4)
    head = head[:-21]  # drop the end mark: the stream goes on
    raw = _repeated(first, _LZ4_BLOCK)
    packed = bytes(lz4.block.compress(raw, store_size=False))
    checksum = xxhash.xxh32_intdigest(raw, seed=compression.LZ4_SEED) & 0x0FFFFFFF
    level = 15  # 1 << (15 + 10) = 32 MiB
    block = struct.pack("<8sBiii", b"LZ4Block", 0x20 | level, len(packed), len(raw), checksum)
    end = struct.pack("<8sBiii", b"LZ4Block", 0x10 | level, 0, 0, 0)
    return head + (block + packed) * max(1, inflated // len(raw)) + end


def deflated_zeros(size: int) -> tuple[bytes, int]:
    """Raw deflate of ``size`` zero bytes (whole MiBs) and its CRC-32."""
    assert size % _MIB == 0
    chunk = bytes(_MIB)
    first = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = first.compress(chunk) + first.flush(zlib.Z_FULL_FLUSH)
    second = first.compress(chunk) + first.flush(zlib.Z_FULL_FLUSH)
    tail = first.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(size // _MIB):
        crc = zlib.crc32(chunk, crc)
    return head + second * (size // _MIB - 1) + tail, crc


def write_zip(path: Path, entries: list[tuple[str, int, bytes, int, int]]) -> None:
    """A zip of ``(name, method, raw data, crc, uncompressed size)`` entries, written by
    hand so a deflate stream made elsewhere goes in as it is."""
    out = bytearray()
    central = bytearray()
    for name, method, data, crc, size in entries:
        raw_name = name.encode()
        offset = len(out)
        out += struct.pack(
            "<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(data), size, len(raw_name), 0
        )
        out += raw_name + data
        central += struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            20,
            20,
            0,
            method,
            0,
            0,
            crc,
            len(data),
            size,
            len(raw_name),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        central += raw_name
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(out), 0
    )
    path.write_bytes(bytes(out + central + end))


def real_zip_entries(real: Path) -> list[tuple[str, int, bytes, int, int]]:
    """The entries of a real ``<v>.zip``, stored."""
    with zipfile.ZipFile(real) as archive:
        entries = []
        for info in archive.infolist():
            data = archive.read(info)
            entries.append((info.filename, zipfile.ZIP_STORED, data, zlib.crc32(data), len(data)))
    return entries


def zip_bomb(real: Path, dest: Path, inflated: int = 1 << 30, name: str = "OPTIONS-999999") -> None:
    """``real`` rewritten with one more entry: ``inflated`` zero bytes, deflated."""
    data, crc = deflated_zeros(inflated)
    entries = real_zip_entries(real)
    entries.insert(0, (name, zipfile.ZIP_DEFLATED, data, crc, inflated))
    write_zip(dest, entries)
