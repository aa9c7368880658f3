"""``formats/sst`` against RocksDB itself: DBs written by rocksdict (RocksDB 9) with the
options Spark can set (format_version 2-5, each compression and checksum Spark's RocksDB
has, block restart intervals, small blocks so that runs of many blocks are decoded), over
several flushes (overlapping tables, updates, deletes), read back by rocksdict and by the
module; what the module leaves to rocksdict; and damaged or hostile tables, which raise a
FormatError naming the file (or a LimitExceededError), never another exception.

The real Spark tables (every RocksDB fixture's zip, Spark 3.3 to 4.2) are compared with
rocksdict in ``tests/test_bulk_rocksdb.py``."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError, LimitExceededError
from ckpt_cli.formats import rocksdb, sst

# Keys of a few bytes from a small alphabet (often written again, often a prefix of
# another), some behind a long common prefix (keys past one 8-byte word, shared prefixes).
_KEY = st.builds(
    lambda prefix, tail: prefix + bytes(tail),
    st.sampled_from([b"", b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x10k"]),
    st.lists(st.sampled_from([0, 1, 2, 0x80]), min_size=1, max_size=4),
)
# A write: a key (some are a shorter key plus zero bytes: bytewise order must hold), and a
# value or None (a delete).
_WRITE = st.tuples(
    _KEY,
    st.booleans(),
    st.one_of(st.none(), st.binary(max_size=300)),
)


def _options(
    compression: str,
    checksum: str,
    version: int,
    restart: int,
    *,
    index_restart: int = 1,
    block_size: int = 256,  # many blocks for a few hundred pairs
) -> Any:
    from rocksdict import (
        BlockBasedOptions,
        ChecksumType,
        DBCompressionType,
        Options,
    )

    table = BlockBasedOptions()
    table.set_format_version(version)
    table.set_checksum_type(getattr(ChecksumType, checksum)())
    table.set_block_size(block_size)
    table.set_block_restart_interval(restart)
    table.set_index_block_restart_interval(index_restart)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_block_based_table_factory(table)
    options.set_compression_type(getattr(DBCompressionType, compression)())
    options.set_disable_auto_compactions(True)  # every flush stays a table
    return options


def _write_db(
    path: Path,
    options: Any,
    flushes: list[list[tuple[bytes, bytes | None]]],
    snapshots: bool = False,
) -> None:
    """Each list of writes flushed to a table; with ``snapshots``, a snapshot taken before
    each write keeps every older record of a key in the table (sequence numbers apart)."""
    from rocksdict import Rdict

    db = Rdict(str(path), options=options)
    held = []
    for writes in flushes:
        for key, value in writes:
            if snapshots:
                held.append(db.snapshot())
            if value is None:
                db.delete(key)
            else:
                db[key] = value
        db.flush()
    del held
    db.close()


def _tables(path: Path) -> list[sst.Table | None]:
    return [sst.open_table(str(p), p.read_bytes()) for p in sorted(path.glob("*.sst"))]


def _pairs(tables: list[sst.Table], group: int = sst.GROUP_BYTES) -> list[tuple[bytes, bytes]]:
    out = []
    for got in sst.db_records(tables, group):
        for i in range(len(got)):
            if got.kinds[i] == sst.VALUE and not got.repeats[i]:
                at, size = int(got.value_offsets[i]), int(got.value_sizes[i])
                out.append((got.key(i), got.data[at : at + size]))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flushes=st.lists(st.lists(_WRITE, max_size=60), min_size=1, max_size=4),
    compression=st.sampled_from(["none", "lz4", "lz4hc", "snappy", "zstd"]),
    checksum=st.sampled_from(["crc32c", "xxh3"]),
    version=st.integers(2, 5),
    restart=st.integers(1, 20),
    snapshots=st.booleans(),
    group=st.sampled_from([1, 600, sst.GROUP_BYTES]),  # blocks decoded one, a few, all at once
)
# A key written three times under snapshots, its newest record a delete, within a restart
# interval and across one (restart interval 2).
@example(
    flushes=[[(b"a", False, b"1"), (b"b", False, b"1"), (b"a", False, b"2"), (b"a", False, None)]],
    compression="lz4",
    checksum="xxh3",
    version=5,
    restart=2,
    snapshots=True,
    group=sst.GROUP_BYTES,
)
@example(
    # values past the block size: a block each, the runs of blocks one block long
    flushes=[[(b"a", False, b"1" * 300), (b"a", False, b"2" * 300), (b"c", False, b"")]],
    compression="none",
    checksum="crc32c",
    version=4,
    restart=16,
    snapshots=True,
    group=1,
)
def test_the_module_reads_what_rocksdb_reads(
    tmp_path_factory: pytest.TempPathFactory,
    flushes: list[list[tuple[bytes, bool, bytes | None]]],
    compression: str,
    checksum: str,
    version: int,
    restart: int,
    snapshots: bool,
    group: int,
) -> None:
    """Each flush's keys behind their own first byte (tables apart: what the module reads;
    tables whose ranges meet are RocksDB's, below)."""
    path = tmp_path_factory.mktemp("db") / "db"
    writes = [
        [(bytes([i]) + key + (b"\x00" if pad else b""), value) for key, pad, value in w]
        for i, w in enumerate(flushes)
    ]
    _write_db(path, _options(compression, checksum, version, restart), writes, snapshots)
    tables = [t for t in _tables(path) if t is not None]
    assert len(tables) == len(list(path.glob("*.sst")))  # options Spark can set are all read
    assert not sst.overlapping(tables)
    assert _pairs(tables, group) == list(rocksdb.iter_db(path))


def test_tables_whose_ranges_meet_are_told(tmp_path: Path) -> None:
    """Two flushes writing one key: the newer table shadows the older; the module does not
    merge them (RocksDB does, ``read.zip_tables`` leaves such a DB to it)."""
    path = tmp_path / "db"
    _write_db(path, _options("lz4", "xxh3", 5, 16), [[(b"a", b"1"), (b"c", b"1")], [(b"b", None)]])
    tables = [t for t in _tables(path) if t is not None]
    assert len(tables) == 2 and sst.overlapping(tables)
    with pytest.raises(ValueError, match="RocksDB's merge"):
        list(sst.db_records(tables))
    _write_db(path, _options("lz4", "xxh3", 5, 16), [[(b"d", b"2")]])
    assert sst.overlapping([t for t in _tables(path) if t is not None])


def _one_table(tmp_path: Path, options: Any, pairs: int = 400) -> Path:
    path = tmp_path / "db"
    _write_db(path, options, [[(b"key%05d" % i, b"value" * (i % 9)) for i in range(pairs)]])
    (table,) = path.glob("*.sst")
    return table


@pytest.mark.parametrize(
    "options",
    [
        {"version": 6},  # RocksDB 9's default; Spark sets 5
        {"version": 5, "index_restart": 4},  # index entries between restarts
    ],
)
def test_what_the_module_does_not_read_is_left_to_rocksdb(
    tmp_path: Path, options: dict[str, int]
) -> None:
    version = options["version"]
    index_restart = options.get("index_restart", 1)
    table = _one_table(tmp_path, _options("lz4", "xxh3", version, 16, index_restart=index_restart))
    assert sst.open_table(str(table), table.read_bytes()) is None


def test_a_table_with_merge_operands_is_left_to_rocksdb() -> None:
    """Spark 4's transformWithState list state writes merge operands."""
    from tests.conftest import CASES_DIR

    tables = sorted((CASES_DIR / "spark4-tws-row").glob("checkpoint/state/*/*/SSTs/*.sst"))
    opened = [sst.open_table(str(p), p.read_bytes()) for p in tables]
    assert tables and None in opened


def test_a_damaged_block_names_the_file_and_its_offset(tmp_path: Path) -> None:
    path = _one_table(tmp_path, _options("lz4", "xxh3", 5, 16))
    raw = bytearray(path.read_bytes())
    table = sst.open_table("t.sst", bytes(raw))
    assert table is not None and len(table.blocks) > 4
    offset, _ = table.blocks[len(table.blocks) // 2]
    raw[offset + 1] ^= 0x40
    damaged = sst.open_table("t.sst", bytes(raw))
    assert damaged is not None  # the first and last blocks are whole
    with pytest.raises(FormatError, match=rf"^t\.sst \(byte {offset}\): block checksum mismatch"):
        _pairs([damaged])


@pytest.mark.parametrize("cut", [0, 1, 52, 53, 200])
def test_a_cut_table_is_a_format_error(tmp_path: Path, cut: int) -> None:
    data = _one_table(tmp_path, _options("lz4", "xxh3", 5, 16)).read_bytes()
    with pytest.raises(FormatError, match=r"^t\.sst"):
        table = sst.open_table("t.sst", data[:cut])
        _pairs([table] if table else [])


def test_a_block_declaring_a_huge_size_is_held_to_the_limits(tmp_path: Path) -> None:
    data = bytearray(_one_table(tmp_path, _options("lz4", "crc32c", 5, 16)).read_bytes())
    table = sst.open_table("t.sst", bytes(data))
    assert table is not None
    offset, size = table.blocks[1]
    assert data[offset + size] == sst.LZ4
    # The varint32 size before the LZ4 data says 4 GiB - 1; the checksum is made to match.
    block = b"\xff\xff\xff\xff\x0f" + bytes(data[offset + 1 : offset + size])
    trailer = struct.pack("<BI", sst.LZ4, sst.block_checksum(sst.CRC32C, block, sst.LZ4))
    data[offset : offset + size + 5] = block + trailer
    hostile = sst.Table(
        "t.sst", bytes(data), table.checksum_type, [(offset, len(block))], 1, b"", b""
    )
    with pytest.raises(LimitExceededError, match=r"^t\.sst"):
        list(hostile.records())


def test_a_block_read_at_open_declaring_a_huge_size_is_held_to_the_limits(
    tmp_path: Path,
) -> None:
    """The first data block (read at open for the table's first key), its size varint made
    to say 4 GiB - 1 in the same number of bytes, its checksum fixed: refused before any
    allocation, as the blocks read later are."""
    data = bytearray(_one_table(tmp_path, _options("lz4", "xxh3", 5, 16)).read_bytes())
    table = sst.open_table("t.sst", bytes(data))
    assert table is not None
    offset, size = table.blocks[0]
    _, at = sst._varint(bytes(data[offset : offset + size]), 0, "t.sst")
    block = b"\xff\xff\xff\xff\x0f" + bytes(data[offset + at : offset + size - (5 - at)])
    assert len(block) == size
    checksum = sst.block_checksum(sst.XXH3, block, sst.LZ4)
    data[offset : offset + size + 5] = block + struct.pack("<BI", sst.LZ4, checksum)
    with pytest.raises(LimitExceededError, match=r"^t\.sst"):
        sst.open_table("t.sst", bytes(data))


@settings(max_examples=300, deadline=None)
@given(blocks=st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_arbitrary_blocks_raise_only_format_errors(blocks: list[bytes]) -> None:
    try:
        got = sst.block_records("t.sst", blocks)
    except FormatError as exc:
        assert str(exc).startswith("t.sst")
    else:
        assert len(got.key_offsets) == len(got.kinds) == len(got.repeats)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_blocks_with_good_checksums_raise_only_format_errors(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Bytes changed inside an uncompressed block, its checksum then fixed: the parsing
    itself meets hostile entries (a checksum would catch a random change first)."""
    path = tmp_path_factory.mktemp("db")
    raw = _UNCOMPRESSED.get("table")
    if raw is None:
        raw = _one_table(path, _options("none", "xxh3", 5, 4), pairs=120).read_bytes()
        _UNCOMPRESSED["table"] = raw
    table = sst.open_table("t.sst", raw)
    assert table is not None
    mutated = bytearray(raw)
    index = data.draw(st.integers(0, len(table.blocks) - 1))
    offset, size = table.blocks[index]
    for _ in range(data.draw(st.integers(1, 6))):
        at = offset + data.draw(st.integers(0, size - 1))
        mutated[at] = data.draw(st.integers(0, 255))
    block = bytes(mutated[offset : offset + size])
    checksum = sst.block_checksum(sst.XXH3, block, sst.NO_COMPRESSION)
    mutated[offset + size + 1 : offset + size + 5] = struct.pack("<I", checksum)
    try:
        reopened = sst.open_table("t.sst", bytes(mutated))
        if reopened is not None:
            _pairs([reopened])
    except FormatError as exc:
        assert str(exc).startswith("t.sst")


_UNCOMPRESSED: dict[str, bytes] = {}
