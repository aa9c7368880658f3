"""Spark's ``CompressionCodec`` streams, decoded in bounded memory.

Every state file Spark compresses (HDFS ``.delta``/``.snapshot``, RocksDB ``.changelog``) is
one stream of ``spark.sql.streaming.stateStore.compression.codec`` (docs §4). The codec is
detected from the first bytes, because the conf can change between runs and a file keeps the
codec it was written with:

=========  ==========================  ==============================================
codec      magic                       framing
=========  ==========================  ==============================================
lz4        ``LZ4Block``                lz4-java ``LZ4BlockOutputStream`` blocks with an
                                       XXH32 checksum (seed 0x9747B28C, low 28 bits)
zstd       ``28 B5 2F FD``             standard zstd frames (zstd-jni)
snappy     ``82 SNAPPY 00``            snappy-java ``SnappyOutputStream``: 16-byte header
                                       then ``int32 BE length + raw snappy block``
lzf        ``ZV``                      ning compress-lzf chunks
=========  ==========================  ==============================================

``decompressed_chunks`` yields the decompressed bytes; every problem is a ``FormatError``
naming the file and the byte offset in the *compressed* file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Final, Protocol

import cramjam
import lz4.block
import xxhash
import zstandard

from ckpt_cli.errors import ChecksumMismatchError, FormatError, TruncatedFileError
from ckpt_cli.formats.limits import Limits

LZ4: Final = "lz4"
ZSTD: Final = "zstd"
SNAPPY: Final = "snappy"
LZF: Final = "lzf"
CODECS: Final = (LZ4, ZSTD, SNAPPY, LZF)

LZ4_MAGIC: Final = b"LZ4Block"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
SNAPPY_MAGIC: Final = b"\x82SNAPPY\x00"
LZF_MAGIC: Final = b"ZV"

# lz4-java: XXHashFactory.fastestInstance().newStreamingHash(DEFAULT_SEED).asChecksum()
LZ4_SEED: Final = 0x9747B28C
_LZ4_HEADER = struct.Struct("<8sBiii")
_LZ4_METHOD_RAW = 0x10
_LZ4_METHOD_LZ4 = 0x20
# lz4-java encodes the block size as 1 << (level + 10) and caps it at 32 MiB.
_LZ4_MAX_LEVEL = 15

_SNAPPY_HEADER_LEN = 16
# snappy-java writes blocks of spark.io.compression.snappy.blockSize (32 KiB default); a
# length beyond this is corruption, and bounding it bounds memory.
_SNAPPY_MAX_BLOCK = 64 << 20

# Output of one decompression step is coalesced to this size before it is handed on, and
# zstd input is fed in small pieces so that a "zip bomb" cannot inflate unboundedly at once:
# a zstd block inflates at most ~32,768x (4 bytes of RLE block -> 128 KiB), so 1 KiB of
# input makes at most 32 MiB of output (an lz4 block's maximum too).
_OUT_CHUNK = 256 << 10
_ZSTD_IN_CHUNK = 1 << 10


class Readable(Protocol):
    """What the readers need of a stream: ``read(n)``, short only at the end."""

    def read(self, n: int = -1, /) -> bytes: ...


def detect_codec(head: bytes) -> str | None:
    """The codec whose magic starts ``head``, or None."""
    if head.startswith(LZ4_MAGIC):
        return LZ4
    if head.startswith(ZSTD_MAGIC):
        return ZSTD
    if head.startswith(SNAPPY_MAGIC):
        return SNAPPY
    if head.startswith(LZF_MAGIC):
        return LZF
    return None


def _describe(head: bytes) -> str:
    return head[:8].hex(" ") if head else "nothing (empty file)"


class _Source:
    """A binary stream with the offset of the next unread byte."""

    def __init__(self, stream: Readable) -> None:
        self.stream = stream
        self.offset = 0
        self._pending = b""

    def unread(self, data: bytes) -> None:
        self._pending = data + self._pending
        self.offset -= len(data)

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes; fewer only at the end of the stream."""
        parts: list[bytes] = []
        if self._pending:
            take, self._pending = self._pending[:n], self._pending[n:]
            parts.append(take)
            n -= len(take)
        while n > 0:
            data = self.stream.read(n)
            if not data:
                break
            parts.append(data)
            n -= len(data)
        out = b"".join(parts)
        self.offset += len(out)
        return out

    def heads(self, n: int) -> Iterator[tuple[int, bytes]]:
        """Each chunk's (block's, frame's) offset and first ``n`` bytes (fewer only at the end
        of the stream) until the stream ends; the caller reads the rest of the chunk."""
        while True:
            at = self.offset
            head = self.read(n)
            if not head:
                return
            yield at, head


def decompressed_chunks(
    path: str, stream: Readable, *, codec: str | None = None, limits: Limits | None = None
) -> Iterator[bytes]:
    """Decompress one state file, yielding pieces of its plain bytes in order.

    ``codec`` is what the conf says; the magic in the bytes decides, and a file with no known
    magic is an error (Spark would fail to read it too). The output is held to ``limits``
    (default: ``Limits.current()``) as it is produced: ``LimitExceededError`` stops a
    decompression bomb before it has inflated much.
    """
    source = _Source(stream)
    head = source.read(8)
    source.unread(head)
    found = detect_codec(head)
    if found is None:
        expected = f"a {codec} stream" if codec else "a Spark compression stream"
        raise FormatError(
            path,
            f"expected {expected} (lz4/zstd/snappy/lzf magic), found {_describe(head)}",
            offset=0,
        )
    decoder = {LZ4: _lz4, ZSTD: _zstd, SNAPPY: _snappy, LZF: _lzf}[found]
    bounded = _bounded(path, source, decoder(path, source), limits or Limits.current(), found)
    yield from _coalesce(bounded)


def decompress(path: str, data: bytes, *, codec: str | None = None) -> bytes:
    """Whole-buffer convenience over ``decompressed_chunks``."""
    import io

    return b"".join(decompressed_chunks(path, io.BytesIO(data), codec=codec))


def _bounded(
    path: str, src: _Source, pieces: Iterator[bytes], limits: Limits, codec: str
) -> Iterator[bytes]:
    # Checked per decoded piece against the compressed bytes consumed so far (``src.offset``),
    # so the check runs during decompression and a bomb stops near the limit's floor.
    total = 0
    for piece in pieces:
        total += len(piece)
        limits.check_inflation(path, src.offset, total, f"the {codec} stream")
        yield piece


def _coalesce(pieces: Iterator[bytes]) -> Iterator[bytes]:
    buffered: list[bytes] = []
    size = 0
    for piece in pieces:
        if not piece:
            continue
        buffered.append(piece)
        size += len(piece)
        if size >= _OUT_CHUNK:
            yield b"".join(buffered)
            buffered, size = [], 0
    if buffered:
        yield b"".join(buffered)


# -- lz4 -------------------------------------------------------------------------------------


def _lz4(path: str, src: _Source) -> Iterator[bytes]:
    # Several LZ4Block streams may be concatenated: the stream may end after any end mark.
    for at, header in src.heads(_LZ4_HEADER.size):
        if len(header) < _LZ4_HEADER.size:
            if not LZ4_MAGIC.startswith(header[:8]):
                raise FormatError(
                    path, f"expected LZ4Block magic, found {_describe(header)}", offset=at
                )
            raise TruncatedFileError(
                path,
                f"lz4 stream ends inside a block header ({len(header)} of 21 bytes)",
                offset=at,
            )
        magic, token, compressed_len, original_len, checksum = _LZ4_HEADER.unpack(header)
        if magic != LZ4_MAGIC:
            raise FormatError(path, f"expected LZ4Block magic, found {_describe(magic)}", offset=at)
        method, level = token & 0xF0, token & 0x0F
        if method not in (_LZ4_METHOD_RAW, _LZ4_METHOD_LZ4) or level > _LZ4_MAX_LEVEL:
            raise FormatError(path, f"bad lz4 block token 0x{token:02x}", offset=at + 8)
        block_size = 1 << (level + 10)
        bad_lengths = (
            original_len < 0
            or compressed_len < 0
            or original_len > block_size
            or compressed_len > block_size + block_size // 255 + 16
            or (original_len == 0) != (compressed_len == 0)
            or (method == _LZ4_METHOD_RAW and original_len != compressed_len)
        )
        if bad_lengths:
            raise FormatError(
                path,
                f"bad lz4 block lengths (compressed {compressed_len}, original {original_len}, "
                f"block size {block_size})",
                offset=at + 9,
            )
        if original_len == 0:
            if checksum != 0:
                raise FormatError(path, "lz4 end mark with a non-zero checksum", offset=at + 17)
            # End mark. lz4-java keeps reading: another stream may follow.
            continue
        payload = src.read(compressed_len)
        if len(payload) < compressed_len:
            raise TruncatedFileError(
                path,
                f"lz4 stream ends inside a block ({len(payload)} of {compressed_len} bytes)",
                offset=at + _LZ4_HEADER.size,
            )
        if method == _LZ4_METHOD_RAW:
            raw = payload
        else:
            try:
                raw = lz4.block.decompress(payload, uncompressed_size=original_len)
            except lz4.block.LZ4BlockError as exc:
                raise FormatError(path, f"corrupt lz4 block: {exc}", offset=at) from None
            if len(raw) != original_len:
                raise FormatError(
                    path,
                    f"lz4 block decompressed to {len(raw)} bytes, header says {original_len}",
                    offset=at,
                )
        actual = xxhash.xxh32_intdigest(raw, seed=LZ4_SEED) & 0x0FFFFFFF
        if actual != checksum & 0xFFFFFFFF:
            raise ChecksumMismatchError(
                path,
                f"lz4 block checksum 0x{checksum & 0xFFFFFFFF:08x} does not match its data "
                f"(0x{actual:08x})",
                offset=at + 17,
            )
        yield raw


# -- zstd ------------------------------------------------------------------------------------


def _zstd(path: str, src: _Source) -> Iterator[bytes]:
    dctx = zstandard.ZstdDecompressor()
    for frame_at, head in src.heads(4):
        if head != ZSTD_MAGIC:
            if len(head) < 4 and ZSTD_MAGIC.startswith(head):
                raise TruncatedFileError(
                    path, "zstd stream ends inside a frame header", offset=frame_at
                )
            raise FormatError(
                path, f"expected a zstd frame, found {_describe(head)}", offset=frame_at
            )
        src.unread(head)
        obj = dctx.decompressobj()
        while not obj.eof:
            at = src.offset
            data = src.read(_ZSTD_IN_CHUNK)
            if not data:
                raise TruncatedFileError(path, "zstd stream ends inside a frame", offset=at)
            try:
                out = obj.decompress(data)
            except zstandard.ZstdError as exc:
                raise FormatError(path, f"corrupt zstd data: {exc}", offset=at) from None
            yield out
        # Bytes after this frame's end belong to the next frame.
        if obj.unused_data:
            src.unread(obj.unused_data)


# -- snappy ----------------------------------------------------------------------------------


def _snappy(path: str, src: _Source) -> Iterator[bytes]:
    for at, head in src.heads(4):
        if head == SNAPPY_MAGIC[:4]:
            rest = src.read(_SNAPPY_HEADER_LEN - 4)
            if len(rest) < _SNAPPY_HEADER_LEN - 4:
                raise TruncatedFileError(path, "snappy stream ends inside its header", offset=at)
            if rest[:4] != SNAPPY_MAGIC[4:]:
                raise FormatError(path, "bad snappy-java stream header", offset=at)
            # A header may repeat where streams were concatenated.
            continue
        if len(head) < 4:
            raise TruncatedFileError(path, "snappy stream ends inside a chunk length", offset=at)
        (length,) = struct.unpack(">i", head)
        if not 0 < length <= _SNAPPY_MAX_BLOCK:
            raise FormatError(path, f"bad snappy chunk length {length}", offset=at)
        payload = src.read(length)
        if len(payload) < length:
            raise TruncatedFileError(
                path,
                f"snappy stream ends inside a chunk ({len(payload)} of {length} bytes)",
                offset=at,
            )
        try:
            expected = cramjam.snappy.decompress_raw_len(payload)
        except cramjam.DecompressionError as exc:
            raise FormatError(path, f"corrupt snappy chunk: {exc}", offset=at + 4) from None
        if expected > _SNAPPY_MAX_BLOCK:
            raise FormatError(
                path, f"snappy chunk claims {expected} decompressed bytes", offset=at + 4
            )
        try:
            yield bytes(cramjam.snappy.decompress_raw(payload))
        except cramjam.DecompressionError as exc:
            raise FormatError(path, f"corrupt snappy chunk: {exc}", offset=at + 4) from None


# -- lzf -------------------------------------------------------------------------------------


def _lzf(path: str, src: _Source) -> Iterator[bytes]:
    for at, head in src.heads(3):
        if len(head) < 3 or head[:2] != LZF_MAGIC:
            if len(head) < 3 and LZF_MAGIC.startswith(head[:2]):
                raise TruncatedFileError(path, "lzf stream ends inside a chunk header", offset=at)
            raise FormatError(
                path, f"expected an lzf chunk ('ZV'), found {_describe(head)}", offset=at
            )
        kind = head[2]
        if kind == 0:
            lengths = src.read(2)
            if len(lengths) < 2:
                raise TruncatedFileError(path, "lzf stream ends inside a chunk header", offset=at)
            (length,) = struct.unpack(">H", lengths)
            data = src.read(length)
            if len(data) < length:
                raise TruncatedFileError(path, "lzf stream ends inside a chunk", offset=at)
            yield data
        elif kind == 1:
            lengths = src.read(4)
            if len(lengths) < 4:
                raise TruncatedFileError(path, "lzf stream ends inside a chunk header", offset=at)
            compressed_len, original_len = struct.unpack(">HH", lengths)
            data = src.read(compressed_len)
            if len(data) < compressed_len:
                raise TruncatedFileError(path, "lzf stream ends inside a chunk", offset=at)
            yield lzf_decompress_block(path, data, original_len, at + 7)
        else:
            raise FormatError(path, f"bad lzf chunk type {kind}", offset=at + 2)


def lzf_decompress_block(path: str, data: bytes, original_len: int, at: int = 0) -> bytes:
    """One liblzf block. Pure Python: no maintained wheel exists, and Spark rarely writes lzf.

    Control byte ``c``: ``c < 32`` copies ``c + 1`` literal bytes; otherwise a back reference
    of length ``(c >> 5) + 2`` (7 means: add the next byte) at distance
    ``((c & 31) << 8) + next byte + 1``.
    """
    out = bytearray()
    pos, end = 0, len(data)
    while pos < end:
        ctrl = data[pos]
        pos += 1
        if ctrl < 32:
            n = ctrl + 1
            if pos + n > end:
                raise FormatError(path, "lzf literal run past the block end", offset=at + pos)
            out += data[pos : pos + n]
            pos += n
        else:
            length = ctrl >> 5
            if length == 7:
                if pos >= end:
                    raise FormatError(
                        path, "lzf block ends inside a back reference", offset=at + pos
                    )
                length += data[pos]
                pos += 1
            if pos >= end:
                raise FormatError(path, "lzf block ends inside a back reference", offset=at + pos)
            ref = len(out) - ((ctrl & 0x1F) << 8) - data[pos] - 1
            pos += 1
            if ref < 0:
                raise FormatError(
                    path, "lzf back reference before the block start", offset=at + pos
                )
            length += 2
            distance = len(out) - ref
            if distance >= length:
                out += out[ref : ref + length]
            else:  # overlaps its own output: the last ``distance`` bytes repeat
                pattern = out[ref:]
                out += (pattern * (length // distance + 1))[:length]
        if len(out) > original_len:
            break
    if len(out) != original_len:
        raise FormatError(
            path,
            f"lzf block decompressed to {len(out)} bytes, header says {original_len}",
            offset=at,
        )
    return bytes(out)


# -- writing ---------------------------------------------------------------------------------

# spark.io.compression.{lz4,snappy}.blockSize and zstd.bufferSize all default to 32 KiB.
SPARK_BLOCK_SIZE: Final = 32 << 10
# ning compress-lzf's LZFChunk.MAX_CHUNK_LEN.
_LZF_MAX_CHUNK = 0xFFFF


def compress(data: bytes, codec: str, *, block_size: int = SPARK_BLOCK_SIZE) -> bytes:
    """``data`` as one ``codec`` stream (whole-buffer form of ``compressed_chunks``)."""
    return b"".join(compressed_chunks((data,), codec, block_size=block_size))


def compressed_chunks(
    chunks: Iterable[bytes], codec: str, *, block_size: int = SPARK_BLOCK_SIZE
) -> Iterator[bytes]:
    """Encode a stream of plain bytes as Spark's ``CompressionCodec.compressedOutputStream``
    does, in bounded memory: lz4-java ``LZ4BlockOutputStream`` blocks of ``block_size`` with
    their XXH32 checksums and the end mark; zstd-jni's streaming frame at level 1 (no content
    size, as a stream cannot know it); snappy-java's header and ``block_size`` chunks; lzf
    chunks of at most 64 KiB (stored uncompressed: ``LZFInputStream`` reads both kinds, and
    no maintained Python LZF encoder exists)."""
    if codec not in CODECS:
        raise ValueError(f"unknown codec {codec!r}; Spark's are {', '.join(CODECS)}")
    if codec == ZSTD:
        packer = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
        for chunk in chunks:
            if out := packer.compress(chunk):
                yield out
        yield packer.flush()
        return
    size = _LZF_MAX_CHUNK if codec == LZF else block_size
    encode = {LZ4: _lz4_block, SNAPPY: _snappy_block, LZF: _lzf_block}[codec]
    if codec == SNAPPY:
        yield SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
    for block in _blocks(chunks, size):
        yield encode(block, size)
    if codec == LZ4:
        yield _LZ4_HEADER.pack(LZ4_MAGIC, _LZ4_METHOD_RAW | _lz4_level(size), 0, 0, 0)


def _blocks(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """The bytes of ``chunks`` regrouped into blocks of ``size`` (the last one shorter)."""
    pending = bytearray()
    for chunk in chunks:
        pending += chunk
        if len(pending) >= size:
            whole = len(pending) // size * size
            for start in range(0, whole, size):
                yield bytes(pending[start : start + size])
            del pending[:whole]
    if pending:
        yield bytes(pending)


def _lz4_level(block_size: int) -> int:
    return max(0, (block_size - 1).bit_length() - 10)


def _lz4_block(raw: bytes, block_size: int) -> bytes:
    packed: bytes = lz4.block.compress(raw, store_size=False)
    method = _LZ4_METHOD_LZ4
    if len(packed) >= len(raw):
        packed, method = raw, _LZ4_METHOD_RAW
    checksum = xxhash.xxh32_intdigest(raw, seed=LZ4_SEED) & 0x0FFFFFFF
    token = method | _lz4_level(block_size)
    return _LZ4_HEADER.pack(LZ4_MAGIC, token, len(packed), len(raw), checksum) + packed


def _snappy_block(raw: bytes, _block_size: int) -> bytes:
    packed = bytes(cramjam.snappy.compress_raw(raw))
    return struct.pack(">i", len(packed)) + packed


def _lzf_block(raw: bytes, _block_size: int) -> bytes:
    return LZF_MAGIC + struct.pack(">BH", 0, len(raw)) + raw
