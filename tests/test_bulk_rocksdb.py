"""The bulk RocksDB merge (``replay/bulk_rocksdb``) against the streamed one
(``read.iter_state``): real Spark zips with changelogs rewritten to random puts and
deletes of the fixture's own keys (and new keys of the same shape), in V1 and V3 (format v2)
changelogs; and what either does with a damaged SST."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import ReplayPlan, codec_of, plan_version
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import compression, records, rocksdb
from ckpt_cli.state import bulk_rocksdb
from ckpt_cli.state.bulk import packed_batches
from tests.conftest import CASES_DIR

_INT = struct.Struct(">i")
# A zip (8) with one changelog (9) after it, V1 headerless and V3 with lineage.
CASES = ["spark4-rocksdb-changelog", "spark4-rocksdb-v2", "spark35-rocksdb-changelog"]


def _copy(case: str, root: Path) -> Path:
    shutil.copytree(CASES_DIR / case / "checkpoint", root)
    return root


def _plan(root: Path, version: int) -> tuple[Checkpoint, ReplayPlan]:
    ckpt = Checkpoint.open(str(root))
    return ckpt, plan_version(ckpt, 0, 0, version)


def _bulk(ckpt: Checkpoint, plan: ReplayPlan) -> list[tuple[bytes, bytes]]:
    return [pair for batch in packed_batches(ckpt, plan, size=7) for pair in batch.pairs()]


def _rewrite(path: Path, data: bytes, codec: str) -> None:
    path.write_bytes(compression.compress(data, codec))
    for crc in (path.with_name(f".{path.name}.crc"), path.with_name(f"{path.name}.crc")):
        crc.unlink(missing_ok=True)


# A change: (index into the zip's keys, or a new key made from one; delete?; value seed).
_change = st.tuples(st.integers(0, 10_000), st.booleans(), st.booleans(), st.integers(0, 255))


def _write_changelog(
    root: Path, ckpt: Checkpoint, plan: ReplayPlan, changes: list[tuple[bytes, bytes | None]]
) -> None:
    """Replace the plan's one changelog by these puts (and deletes: None), header kept."""
    (step,) = plan.steps
    path = root / step.path
    codec = codec_of(ckpt)
    with open(path, "rb") as fh:
        data = b"".join(compression.decompressed_chunks(str(path), fh, codec=codec))
    out = bytearray(data[: records.open_changelog(str(path), [data]).records_offset])
    for key, value in changes:
        out += _INT.pack(len(key)) + key
        out += _INT.pack(-1) if value is None else _INT.pack(len(value)) + value
    out += _INT.pack(-1)
    _rewrite(path, bytes(out), codec)


@pytest.mark.parametrize("case", CASES)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(changes=st.lists(_change, max_size=40), odd=st.booleans())
def test_bulk_merge_equals_the_streamed_merge(
    tmp_path_factory: pytest.TempPathFactory,
    case: str,
    changes: list[tuple[int, bool, bool, int]],
    odd: bool,
) -> None:
    root = _copy(case, tmp_path_factory.mktemp("ckpt") / "ckpt")
    ckpt, plan = _plan(root, 9)
    assert plan.base is not None and plan.base.kind is FileKind.ZIP
    base = list(iter_state(ckpt, plan_version(ckpt, 0, 0, 8)))
    written: list[tuple[bytes, bytes | None]] = []
    for pick, new, delete, seed in changes:
        key, value = base[pick % len(base)]
        if new:  # the same shape, another key: its last word changed
            key = key[:-1] + bytes([(key[-1] + 1 + seed) % 256])
        if odd and seed % 7 == 0:
            key += b"\x01"  # not whole words after the version byte
        changed = bytearray(base[seed % len(base)][1])
        changed[-1] = seed
        written.append((key, None if delete else bytes(changed)))
    _write_changelog(root, ckpt, plan, written)
    ckpt, plan = _plan(root, 9)
    assert bulk_rocksdb.rocksdb_batches(ckpt, plan, 7) is not None  # the bulk path's case
    assert _bulk(ckpt, plan) == list(iter_state(ckpt, plan))  # same pairs, same order


def test_colliding_hashes_are_told_apart_or_left_to_the_streamed_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckpt_cli.core import kernel
    from ckpt_cli.state import bulk

    monkeypatch.setattr(kernel, "ENABLED", False)  # the numpy merge's hashes
    root = _copy("spark4-rocksdb-changelog", tmp_path / "ckpt")
    ckpt, plan = _plan(root, 9)
    base = list(iter_state(ckpt, plan_version(ckpt, 0, 0, 8)))
    monkeypatch.setattr(bulk, "_FNV_PRIME", 0)  # every key hashes alike
    # One change: every zip key is a candidate, the bytes pick the one it changes.
    _write_changelog(root, ckpt, plan, [(base[1][0], base[0][1]), (base[1][0], base[2][1])])
    ckpt, plan = _plan(root, 9)
    assert bulk_rocksdb.rocksdb_batches(ckpt, plan, 7) is not None
    streamed = list(iter_state(ckpt, plan))
    assert _bulk(ckpt, plan) == streamed and streamed[1] == (base[1][0], base[2][1])
    # Two changed keys of one hash: the streamed merge does it.
    _write_changelog(root, ckpt, plan, [(base[1][0], base[0][1]), (base[2][0], None)])
    ckpt, plan = _plan(root, 9)
    assert bulk_rocksdb.rocksdb_batches(ckpt, plan, 7) is None
    assert _bulk(ckpt, plan) == list(iter_state(ckpt, plan))


def test_the_changes_keys_are_hashed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The changelogs' keys are hashed (and sorted) where they are grouped; the lookup
    reuses those hashes, so only the zip's keys are hashed after."""
    from ckpt_cli.core import kernel
    from ckpt_cli.state import bulk

    monkeypatch.setattr(kernel, "ENABLED", False)  # the numpy merge's hashes
    ckpt, plan = _plan(_copy("spark4-rocksdb-changelog", tmp_path / "ckpt"), 9)
    streamed = list(iter_state(ckpt, plan))
    hashed: list[Any] = []  # the buffers hashed (held, so no id is reused)

    def counted(buf: Any, offsets: Any, sizes: Any) -> Any:
        hashed.append(buf)
        return real(buf, offsets, sizes)

    real = bulk.key_hashes
    monkeypatch.setattr(bulk, "key_hashes", counted)
    monkeypatch.setattr(bulk_rocksdb, "key_hashes", counted)
    assert _bulk(ckpt, plan) == streamed
    assert len(hashed) > 1 and len({id(buf) for buf in hashed}) == len(hashed)


@pytest.mark.parametrize("case", CASES)
def test_the_bulk_path_reads_the_fixture_as_the_streamed_one(tmp_path: Path, case: str) -> None:
    ckpt, _ = _plan(_copy(case, tmp_path / "ckpt"), 9)
    for version in (8, 9, 10):  # zip alone, zip + changelog, zip alone
        plan = plan_version(ckpt, 0, 0, version)
        assert bulk_rocksdb.rocksdb_batches(ckpt, plan, 5) is not None
        streamed = list(iter_state(ckpt, plan))
        assert _bulk(ckpt, plan) == streamed and streamed
        limited = [p for b in packed_batches(ckpt, plan, limit=6, size=4) for p in b.pairs()]
        assert limited == streamed[:6]


def test_a_block_failing_its_checksum_mid_scan_is_an_error(tmp_path: Path) -> None:
    """rocksdict's ``items()`` ends quietly at a damaged block: ``iter_db_flat`` must not
    take that for the end of the data (the fixtures' SSTs are a block or two, read at open,
    so this DB is written here: enough pairs for many 4 KiB blocks)."""
    from rocksdict import Options, Rdict

    db_dir = tmp_path / "db"
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(db_dir), options=options)
    pairs = [
        (b"\x00" + i.to_bytes(8, "big") * 2, b"\x00" + bytes([i % 251]) * 24) for i in range(20_000)
    ]
    for key, value in pairs:
        db[key] = value
    db.flush()
    db.close()
    assert _pairs(rocksdb.iter_db_flat(db_dir, size=999)) == pairs
    (sst,) = db_dir.glob("*.sst")
    raw = bytearray(sst.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # a data block in the middle
    sst.write_bytes(bytes(raw))
    read: list[tuple[bytes, bytes]] = []
    with pytest.raises(FormatError, match="RocksDB stopped reading the SST data: Corruption"):
        for chunk in rocksdb.iter_db_flat(db_dir, size=999):
            read += _pairs([chunk])
    assert 0 < len(read) < len(pairs) and read == pairs[: len(read)]


def test_column_family_changelogs_are_left_to_the_streamed_merge(tmp_path: Path) -> None:
    root = _copy("spark4-rocksdb-changelog", tmp_path / "ckpt")
    ckpt, plan = _plan(root, 9)
    (step,) = plan.steps
    path = root / step.path
    key, value = b"\x00" + bytes(8), b"\x00" + bytes(8)
    typed = b"\x00\x02v2" + b"\x11" + _INT.pack(len(key)) + key + _INT.pack(len(value)) + value
    _rewrite(path, typed + b"\x00", codec_of(ckpt))
    ckpt, plan = _plan(root, 9)
    assert bulk_rocksdb.rocksdb_batches(ckpt, plan, 7) is None
    assert _bulk(ckpt, plan) == list(iter_state(ckpt, plan))


def _pairs(chunks: Any) -> list[tuple[bytes, bytes]]:
    """``iter_db_flat``'s flat chunks as pairs."""
    out: list[tuple[bytes, bytes]] = []
    for flat, _ in chunks:
        it = iter(flat)
        out += zip(it, it, strict=True)
    return out


# -- the zip's SSTs read by formats/sst ---------------------------------------------------------


def _zips(ckpt: Checkpoint) -> list[tuple[Any, Any, Any]]:
    """Every zip of the checkpoint: (the file, its partition, a plan-like address)."""
    from types import SimpleNamespace

    out = []
    for op_id, op in ckpt.operators.items():
        for name, store in op.stores.items():
            for pid, part in store.partitions.items():
                where = SimpleNamespace(operator=op_id, store=name, partition=pid)
                out += [(f, part, where) for f in part.files if f.kind is FileKind.ZIP]
    return out


def _zip_pairs(ckpt: Checkpoint, f: Any, where: Any) -> list[tuple[bytes, bytes]]:
    return [p for b in bulk_rocksdb._zip_batches(ckpt, f, where, 5) for p in b.pairs()]


def test_every_fixture_zip_reads_from_its_ssts_as_rocksdb_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark 3.3 to 4.2, every RocksDB store (aggregation, joins, dedup, sessions,
    transformWithState): the pairs the module gives are RocksDB's (rocksdict's), in order."""
    from ckpt_cli.core import read

    read_by_module = zips = 0
    for case in sorted(CASES_DIR.iterdir()):
        if not (case / "checkpoint").is_dir():
            continue
        ckpt = Checkpoint.open(str(case / "checkpoint"))
        for f, part, where in _zips(ckpt):
            zips += 1
            read_by_module += read.zip_tables(ckpt, f, part) is not None
            ours = _zip_pairs(ckpt, f, where)
            with monkeypatch.context() as m:
                m.setattr(bulk_rocksdb, "zip_tables", lambda *_: None)
                assert ours == _zip_pairs(ckpt, f, where), f.path
    # Many are read by the module; the others have tables whose key ranges meet, or merge
    # operands (transformWithState's list state).
    assert zips > 130 and read_by_module > 0.2 * zips


def _readable_zip(root: Path) -> tuple[Checkpoint, Any, Any]:
    """A zip of ``root`` whose SSTs the module reads (tables apart), and its partition."""
    from ckpt_cli.core import read

    ckpt = Checkpoint.open(str(root))
    for f, part, _ in _zips(ckpt):
        if read.zip_tables(ckpt, f, part):
            return ckpt, f, part
    raise AssertionError(f"no zip of {root} is read by formats/sst")


def test_a_zip_whose_log_has_records_is_left_to_rocksdb(tmp_path: Path) -> None:
    import zipfile

    from ckpt_cli.core import read

    root = _copy("spark4-rocksdb-agg", tmp_path / "ckpt")
    _, f, part = _readable_zip(root)
    with zipfile.ZipFile(root / f.path) as zf:
        entries = {i.filename: zf.read(i) for i in zf.infolist()}
    (log,) = (name for name in entries if name.endswith(".log"))
    assert entries[log] == b""  # Spark's: it flushes before the checkpoint
    entries[log] = b"\x00" * 40
    with zipfile.ZipFile(root / f.path, "w") as zf:
        for name, content in entries.items():
            zf.writestr(name, content)
    ckpt = Checkpoint.open(str(root))
    assert read.zip_tables(ckpt, f, part) is None


def test_an_sst_of_another_size_than_recorded_is_a_format_error(tmp_path: Path) -> None:
    from ckpt_cli.core import read

    root = _copy("spark4-rocksdb-agg", tmp_path / "ckpt")
    ckpt, f, part = _readable_zip(root)
    tables = read.zip_tables(ckpt, f, part)
    assert tables
    sst_path = root / tables[0].path
    sst_path.write_bytes(sst_path.read_bytes() + b"\x00")
    ckpt = Checkpoint.open(str(root))
    with pytest.raises(FormatError, match=rf"^{tables[0].path}: size .* differs .* recorded"):
        read.zip_tables(ckpt, f, part)


def test_a_zip_whose_tables_meet_is_left_to_rocksdb(tmp_path: Path) -> None:
    """Each batch's flush holds keys of the batches before it: RocksDB merges them."""
    from ckpt_cli.core import read
    from ckpt_cli.formats import rocksdb_zip, sst

    ckpt, plan = _plan(_copy("spark4-rocksdb-changelog", tmp_path / "ckpt"), 8)
    assert plan.base is not None
    part = ckpt.operators[0].stores[plan.store].partitions[0]
    metadata = rocksdb_zip.read_zip(plan.base.path, ckpt.storage.read_bytes(plan.base.path))
    tables = [
        sst.open_table(
            s.dfs_file_name, ckpt.storage.read_bytes(f"{part.path}/SSTs/{s.dfs_file_name}")
        )
        for s in metadata.metadata.sst_files
    ]
    assert all(tables) and sst.overlapping([t for t in tables if t is not None])
    assert read.zip_tables(ckpt, plan.base, part) is None
    streamed = list(iter_state(ckpt, plan))
    assert _bulk(ckpt, plan) == streamed and streamed


def test_a_zip_left_to_rocksdb_has_its_files_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """zip_tables reads the zip and SSTs before it can tell that their ranges meet; the
    rebuild for RocksDB takes those bytes instead of reading them again."""
    from types import SimpleNamespace

    from ckpt_cli.core import read

    ckpt, plan = _plan(_copy("spark4-rocksdb-changelog", tmp_path / "ckpt"), 8)
    assert plan.base is not None
    part = ckpt.operators[0].stores[plan.store].partitions[0]
    assert read.zip_tables(ckpt, plan.base, part) is None  # tables that meet
    expected = list(iter_state(ckpt, plan))
    reads: list[str] = []
    storage = ckpt.storage
    real_bytes, real_stream = storage.read_bytes, storage.open_stream

    def read_bytes(path: str) -> bytes:
        reads.append(path)
        return real_bytes(path)

    def open_stream(path: str) -> Any:
        reads.append(path)
        return real_stream(path)

    monkeypatch.setattr(storage, "read_bytes", read_bytes)
    monkeypatch.setattr(storage, "open_stream", open_stream)
    where = SimpleNamespace(operator=0, store=plan.store, partition=0)
    assert _zip_pairs(ckpt, plan.base, where) == expected
    assert plan.base.path in reads and sum("/SSTs/" in p for p in reads) > 1
    assert sorted(reads) == sorted(set(reads))  # each file read once
