"""Compression streams and the records of delta/snapshot/changelog files.

Real files come from the bundled fixtures (written by Spark); corrupt ones are changed copies
of them. Every reader fed arbitrary bytes must end in records or a FormatError.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import ChecksumMismatchError, FormatError, TruncatedFileError
from ckpt_cli.formats import compression, records, rocksdb_zip
from ckpt_cli.formats.compression import CODECS, compress, decompress, decompressed_chunks
from ckpt_cli.formats.records import RecordStats, iter_kv_records, open_changelog
from tests.conftest import CASES_DIR

STATE_SUFFIXES = (".delta", ".snapshot", ".changelog")


def real_state_files() -> list[Path]:
    # Complete files only. The *-crash-* fixtures (drivers killed mid-batch) leave their
    # unfinished deltas/changelogs as hidden temp files (``.<name>.<uuid>[.TID<n>].tmp``,
    # skipped by the "." test) and their unfinished SST uploads as empty ``SSTs/*.sst``
    # under final names (not a suffix read here); every visible delta/snapshot/changelog
    # of a crashed checkpoint is complete, so none is skipped.
    return sorted(
        p
        for p in CASES_DIR.glob("*/checkpoint/state/**/*")
        if p.is_file() and p.suffix in STATE_SUFFIXES and not p.name.startswith(".")
    )


REAL = real_state_files()


def _by_codec() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for p in REAL:
        codec = compression.detect_codec(p.read_bytes()[:8])
        assert codec is not None, p
        out.setdefault(codec, []).append(p)
    return out


BY_CODEC = _by_codec() if REAL else {}


def read_all(
    path: Path, data: bytes | None = None
) -> tuple[list[tuple[str, bytes, bytes | None]], RecordStats, int]:
    """Records, stats and changelog format version of a state file's bytes."""
    raw = path.read_bytes() if data is None else data
    chunks = decompressed_chunks(path.name, io.BytesIO(raw))
    if path.suffix == ".changelog":
        changelog = open_changelog(path.name, chunks)
        recs = list(changelog.records())
        return recs, changelog.stats, changelog.format_version
    stats = RecordStats()
    kv = iter_kv_records(path.name, chunks, snapshot=path.suffix == ".snapshot", stats=stats)
    return [("put" if v is not None else "delete", k, v) for k, v in kv], stats, 1


# -- real files ------------------------------------------------------------------------------


def test_fixtures_cover_the_codecs_spark_writes() -> None:
    if not REAL:
        pytest.skip("no fixtures")
    assert {"lz4", "zstd"} <= set(BY_CODEC)


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p.relative_to(CASES_DIR)))
def test_every_real_state_file_reads_to_its_end_marker(path: Path) -> None:
    recs, stats, version = read_all(path)
    assert stats.complete and stats.trailing_bytes == 0
    assert stats.records == len(recs)
    # The decompressed stream is exactly the records plus header and end marker.
    plain = decompress(path.name, path.read_bytes())
    assert stats.data_bytes == len(plain)
    if path.suffix == ".changelog":
        # Spark's changelog writer versions: v1 plain, v2 with column families, v3 format-v2
        # lineage (names <version>_<uniqueId>), v4 both.
        lineage = "_" in path.stem
        families = uses_column_families(path.parent)
        assert version == 1 + 2 * lineage + families, (lineage, families)


def uses_column_families(partition: Path) -> bool:
    """Whether the store's zips name column families (transformWithState, join v3/v4...)."""
    zips = sorted(partition.glob("*.zip"))
    assert zips, f"{partition}: a changelog store with no zip"
    return rocksdb_zip.read_zip(zips[-1].name, zips[-1].read_bytes()).metadata.uses_column_families


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_through_each_codec(codec: str) -> None:
    """Our writer (used by benchmarks and repair) produces what the reader takes back."""
    body = b"".join(
        struct.pack(">i", 8) + b"k%07d" % i + struct.pack(">i", 16) + bytes(16) for i in range(5000)
    ) + struct.pack(">i", -1)
    data = compress(body, codec, block_size=4096)
    assert compression.detect_codec(data) == codec
    assert decompress("x", data) == body
    assert sum(1 for _ in iter_kv_records("x", [decompress("x", data)])) == 5000


def test_codec_recompression_of_real_file_gives_same_records() -> None:
    if not REAL:
        pytest.skip("no fixtures")
    path = next(p for p in REAL if p.suffix == ".delta")
    plain = decompress(path.name, path.read_bytes())
    for codec in CODECS:
        assert decompress("x", compress(plain, codec)) == plain


def test_concatenated_lz4_streams_are_read_across_end_marks() -> None:
    body = struct.pack(">i", 1) + b"a" + struct.pack(">i", 1) + b"b"
    data = compress(body[:5], "lz4") + compress(body[5:] + struct.pack(">i", -1), "lz4")
    assert list(iter_kv_records("x", [decompress("x", data)])) == [(b"a", b"b")]


# -- corrupt copies of real files ------------------------------------------------------------


def _first(codec: str) -> Path:
    if codec not in BY_CODEC:
        pytest.skip(f"no {codec} fixture")
    return max(BY_CODEC[codec], key=lambda p: p.stat().st_size)


@pytest.mark.parametrize("codec", ["lz4", "zstd", "snappy", "lzf"])
def test_truncated_file_is_reported_as_truncated(codec: str) -> None:
    path = _first(codec)
    data = path.read_bytes()
    for cut in (len(data) - 1, len(data) // 2, 9):
        with pytest.raises(TruncatedFileError) as info:
            read_all(path, data[:cut])
        assert path.name in str(info.value)


def test_stream_cut_at_an_lz4_block_boundary_misses_the_end_marker() -> None:
    """A file whose compression is intact but whose records stop early (a writer killed
    between blocks): the missing -1 marker gives it away."""
    path = _first("lz4")
    plain = decompress(path.name, path.read_bytes())
    data = compress(plain[:-4], "lz4")
    with pytest.raises(TruncatedFileError, match="end-of-file marker"):
        read_all(path, data)


def test_flipped_lz4_payload_byte_is_a_checksum_mismatch() -> None:
    path = _first("lz4")
    data = bytearray(path.read_bytes())
    data[21 + 5] ^= 0xFF  # inside the first block's payload
    with pytest.raises(FormatError) as info:
        read_all(path, bytes(data))
    # Either LZ4 itself notices, or the XXH32 checksum does.
    assert "byte" in str(info.value) and path.name in str(info.value)


def test_bad_lz4_checksum_field() -> None:
    path = _first("lz4")
    data = bytearray(path.read_bytes())
    data[17] ^= 0x01
    with pytest.raises(ChecksumMismatchError, match=r"\(byte 17\)"):
        read_all(path, bytes(data))


def test_bad_lz4_header_token() -> None:
    path = _first("lz4")
    data = bytearray(path.read_bytes())
    data[8] = 0x35
    with pytest.raises(FormatError, match=r"\(byte 8\): bad lz4 block token"):
        read_all(path, bytes(data))


def test_wrong_codec_bytes_are_named() -> None:
    with pytest.raises(FormatError, match=r"x\.delta \(byte 0\): expected a lz4 stream"):
        list(decompressed_chunks("x.delta", io.BytesIO(b"PK\x03\x04rest"), codec="lz4"))


def test_empty_file() -> None:
    with pytest.raises(FormatError, match="empty file"):
        list(decompressed_chunks("x.delta", io.BytesIO(b"")))


def test_delta_removes_and_snapshot_rejects_them() -> None:
    body = struct.pack(">i", 1) + b"a" + struct.pack(">i", -1) + struct.pack(">i", -1)
    assert list(iter_kv_records("d", [body])) == [(b"a", None)]
    with pytest.raises(FormatError, match="snapshot"):
        list(iter_kv_records("s", [body], snapshot=True))


def test_bogus_length_is_refused_without_buffering() -> None:
    body = struct.pack(">i", 0x7FFFFFF0) + b"abc"
    with pytest.raises(FormatError, match="larger than any state row"):
        list(iter_kv_records("d", [body]))


def test_record_split_across_chunks() -> None:
    body = struct.pack(">i", 3) + b"key" + struct.pack(">i", 5) + b"value" + struct.pack(">i", -1)
    pieces = [body[i : i + 1] for i in range(len(body))]
    assert list(iter_kv_records("d", pieces)) == [(b"key", b"value")]


def _typed(kind: int, key: bytes, value: bytes | None) -> bytes:
    out = bytes([kind]) + struct.pack(">i", len(key)) + key
    return out + (struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value)


def _utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def test_changelog_v4_typed_records_and_lineage() -> None:
    lineage = '[{"version":1,"checkpointUniqueId":"a"},{"version":2,"checkpointUniqueId":"b"}]'
    body = (
        _utf("v4")
        + _utf(lineage)
        + _typed(0x01, b"k1", b"v1")
        + _typed(0x11, b"k1", b"v2")
        + _typed(0x10, b"k2", None)
        + b"\x00"
    )
    changelog = open_changelog("c", [body])
    assert changelog.format_version == 4
    assert changelog.lineage == (records.LineageEntry(1, "a"), records.LineageEntry(2, "b"))
    assert list(changelog.records()) == [
        ("put", b"k1", b"v1"),
        ("merge", b"k1", b"v2"),
        ("delete", b"k2", None),
    ]
    assert changelog.stats.complete


def test_changelog_v2_without_eof_record_is_truncated() -> None:
    body = _utf("v2") + _typed(0x01, b"k", b"v")
    with pytest.raises(TruncatedFileError):
        list(open_changelog("c", [body]).records())


def test_changelog_unknown_record_type() -> None:
    with pytest.raises(FormatError, match="unknown changelog record type 0x07"):
        list(open_changelog("c", [_utf("v2") + b"\x07"]).records())


def test_changelog_newer_version_is_unsupported() -> None:
    from ckpt_cli.errors import UnsupportedVersionError

    with pytest.raises(UnsupportedVersionError, match="v9"):
        open_changelog("c", [_utf("v9") + b"\x00"])


# -- fuzzing: arbitrary and mutated bytes end in records or FormatError ----------------------


def _mutations() -> st.SearchStrategy[bytes]:
    seeds = [p.read_bytes() for p in REAL[:: max(1, len(REAL) // 40)]] or [b"LZ4Block"]

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(0, 4))):
            op = draw(st.sampled_from(["flip", "cut", "insert", "int"]))
            if not data:
                break
            at = draw(st.integers(0, len(data) - 1))
            if op == "flip":
                data[at] ^= draw(st.integers(1, 255))
            elif op == "cut":
                del data[at:]
            elif op == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            else:
                data[at : at + 4] = struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1)))
        return bytes(data)

    return st.one_of(mutate(), st.binary(max_size=300))


def _drain(name: str, data: bytes) -> Iterator[object]:
    chunks = decompressed_chunks(name, io.BytesIO(data))
    if name.endswith(".changelog"):
        yield from open_changelog(name, chunks).records()
    else:
        yield from iter_kv_records(name, chunks, snapshot=name.endswith(".snapshot"))


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(data=_mutations(), suffix=st.sampled_from(STATE_SUFFIXES))
def test_fuzz_state_file_readers(data: bytes, suffix: str) -> None:
    try:
        for _ in _drain("f" + suffix, data):
            pass
    except FormatError as exc:
        assert str(exc).startswith("f" + suffix)


@FUZZ
@given(body=st.binary(max_size=200), codec=st.sampled_from(CODECS))
def test_fuzz_plain_bytes_behind_a_valid_stream(body: bytes, codec: str) -> None:
    """Valid compression around garbage: the record parsers must cope alone."""
    data = compress(body, codec)
    for suffix in STATE_SUFFIXES:
        try:
            for _ in _drain("g" + suffix, data):
                pass
        except FormatError:
            pass
