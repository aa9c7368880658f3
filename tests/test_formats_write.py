"""The state file writers (``formats/snapshot_write.py``, ``formats/rocksdb_write.py``).

* any records -> encode -> the existing decoders give them back (property tests);
* every fixture store with its newest version's files REPLACED by our full snapshot of the
  same records (``N.snapshot``, or ``N[_id].zip`` + new SSTs, no changelog) replays to the
  same rows and validates as clean as the original;
* the key counts of our zips equal the ones Spark wrote for the same records.

``test_write_spark.py`` has Spark's own ``statestore`` reader read the replaced copies.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_cli
from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.read import iter_state, read_zip_metadata
from ckpt_cli.core.rebuild import codec_of, plan_version
from ckpt_cli.formats import checksums, compression, records, rocksdb, rocksdb_zip
from ckpt_cli.formats.rocksdb_write import (
    VersionOptions,
    build_rocksdb_checkpoint,
    merge_delimiter,
    zip_file_name,
)
from ckpt_cli.formats.snapshot_write import (
    encode_hdfs_snapshot,
    hdfs_snapshot_chunks,
    with_hdfs_value_checksum,
)
from ckpt_cli.formats.state_encoders import (
    row_checksums,
    split_column_family,
    split_list_value,
    strip_hdfs_value_checksum,
)
from ckpt_cli.replay import read_state
from ckpt_cli.state.reader import covering_reads
from ckpt_cli.state.tws import list_families
from tests.conftest import REPO

FIXTURE_DIRS = (REPO / "fixtures" / "checkpoints",)
# Crash fixtures stop mid-batch on purpose; their newest version is not a committed one.
CASES = sorted(
    {
        p.parent.name: p
        for d in FIXTURE_DIRS
        for p in d.glob("*/checkpoint")
        if "crash" not in p.parent.name
    }.items()
)
MERGE_CONF = "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

record_lists = st.lists(st.tuples(st.binary(max_size=300), st.binary(max_size=3000)), max_size=40)


def decode_snapshot(data: bytes) -> list[tuple[bytes, bytes | None]]:
    chunks = compression.decompressed_chunks("<snapshot>", io.BytesIO(data))
    return list(records.iter_kv_records("<snapshot>", chunks, snapshot=True))


# -- HDFS snapshots --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(record_lists, st.sampled_from(compression.CODECS))
def test_any_records_encode_and_decode_back(recs: list[tuple[bytes, bytes]], codec: str) -> None:
    data = encode_hdfs_snapshot(recs, codec)
    assert compression.detect_codec(data) == codec
    assert decode_snapshot(data) == recs


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=1, max_size=200_000), st.lists(st.integers(1, 70_000), max_size=8))
def test_streamed_compression_equals_whole(data: bytes, cuts: list[int]) -> None:
    """However the plain bytes arrive, the stream is the same (blocks are regrouped)."""
    pieces, at = [], 0
    for cut in cuts:
        pieces.append(data[at : at + cut])
        at += cut
    pieces.append(data[at:])
    for codec in compression.CODECS:
        streamed = b"".join(compression.compressed_chunks(pieces, codec))
        if codec != compression.ZSTD:  # zstd's block boundaries follow the input's
            assert streamed == compression.compress(data, codec)
        assert compression.decompress("<x>", streamed) == data


def test_large_snapshot_streams_in_blocks() -> None:
    recs = [(b"k%07d" % i, b"v" * (i % 50)) for i in range(50_000)]
    chunks = list(hdfs_snapshot_chunks(recs, compression.LZ4))
    assert len(chunks) > 10
    assert decode_snapshot(b"".join(chunks)) == recs


def test_snapshot_bytes_are_sparks_framing() -> None:
    """keySize/key/valueSize/value big-endian, then -1: checked on the plain bytes."""
    data = encode_hdfs_snapshot([(b"ab", b"xyz")], compression.LZ4)
    plain = compression.decompress("<x>", data)
    assert plain == b"\x00\x00\x00\x02ab\x00\x00\x00\x03xyz\xff\xff\xff\xff"


@settings(max_examples=30, deadline=None)
@given(record_lists)
def test_row_checksums_are_added_and_verify(recs: list[tuple[bytes, bytes]]) -> None:
    data = encode_hdfs_snapshot(recs, compression.LZ4, row_checksums=True)
    back = []
    for key, value in decode_snapshot(data):
        assert value is not None
        body, checksum = strip_hdfs_value_checksum(key, value)
        assert checksum.ok
        assert value == with_hdfs_value_checksum(key, body)
        back.append((key, body))
    assert back == recs


def test_unknown_codec_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown codec"):
        encode_hdfs_snapshot([], "gzip")


# -- RocksDB checkpoints ---------------------------------------------------------------------


def read_back(files: dict[str, bytes], tmp: Path) -> list[tuple[bytes, bytes]]:
    """Rebuild the DB from our zip + SSTs (Spark's loadCheckpointFromDfs) and iterate it."""
    zips = [name for name in files if name.endswith(".zip")]
    assert len(zips) == 1
    meta = rocksdb_zip.rebuild_db_dir(files[zips[0]], files.__getitem__, tmp)
    assert {f"SSTs/{f.dfs_file_name}" for f in meta.sst_files} <= set(files)
    return list(rocksdb.iter_db(tmp))


@settings(max_examples=15, deadline=None)
@given(st.dictionaries(st.binary(min_size=1, max_size=50), st.binary(max_size=500), max_size=60))
def test_any_records_build_a_db_that_reads_back(recs: dict[bytes, bytes]) -> None:
    import tempfile

    out = build_rocksdb_checkpoint(recs.items(), 7)
    assert out.zip_name == "7.zip" and out.zip_checksum is None
    assert out.metadata.num_keys == len(recs)
    with tempfile.TemporaryDirectory() as tmp:
        assert read_back(dict(out.files()), Path(tmp)) == sorted(recs.items())


def test_zip_holds_what_sparks_zip_holds(tmp_path: Path) -> None:
    recs = [(b"\x00key%d" % i, b"\x00value%d" % i) for i in range(100)]
    uid = "0b6f5f5e-0000-4000-8000-000000000001"
    out = build_rocksdb_checkpoint(recs, 12, VersionOptions(unique_id=uid, now_ms=1))
    assert out.zip_name == zip_file_name(12, uid) == f"12_{uid}.zip"
    with zipfile.ZipFile(io.BytesIO(out.zip_bytes)) as archive:
        infos = archive.infolist()
        names = [i.filename for i in infos]
        text = archive.read("metadata").decode()
    # Flat DEFLATE entries, metadata last (zipToDfsFile: localOtherFiles :+ metadataFile).
    assert names[-1] == "metadata"
    assert {re.sub(r"\d+", "N", n) for n in names} == {
        "CURRENT",
        "MANIFEST-N",
        "OPTIONS-N",
        "N.log",
        "metadata",
    }
    assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in infos)
    header, body = text.split("\n", 1)
    assert header == "v1" and not body.endswith("\n")
    obj = json.loads(body)
    assert list(obj) == [
        "sstFiles",
        "numKeys",
        "numInternalKeys",
        "columnFamilyMapping",
        "columnFamilyTypeMap",
        "maxColumnFamilyId",
    ]
    assert obj["numKeys"] == 100 and obj["numInternalKeys"] == 0
    suffixes = set()
    for f in obj["sstFiles"]:
        match = re.fullmatch(rf"(\d{{6}})-({UUID})\.sst", f["dfsSstFileName"])
        assert match and f["localFileName"] == f"{match[1]}.sst"
        assert f["sizeBytes"] == len(out.ssts[f["dfsSstFileName"]])
        suffixes.add(match[2])
    assert len(suffixes) == 1  # one suffix per upload, as Spark 4.x names them
    # Spark's CRC32C sidecar (format v2), and every Hadoop sidecar, verify.
    assert out.zip_checksum is not None
    crc = checksums.parse_spark_checksum("x.crc", out.zip_checksum)
    assert checksums.verify_spark_checksum(crc, out.zip_bytes) is None
    assert list(crc.raw) == ["algorithm", "value", "mainFileSize", "timestampMs", "creator"]
    written = out.files(hadoop_crc=True)
    assert [p for p, _ in written][-4:] == [
        out.zip_name,
        f".{out.zip_name}.crc",
        f"{out.zip_name}.crc",
        f".{out.zip_name}.crc.crc",
    ]
    by_path = dict(written)
    for path, data in written:
        parent, _, name = path.rpartition("/")
        if not name.startswith("."):
            hidden = by_path[f"{parent}/.{name}.crc" if parent else f".{name}.crc"]
            assert (
                checksums.verify_hadoop_crc(checksums.parse_hadoop_crc(path, hidden), data) is None
            )
    assert read_back(dict(out.files()), tmp_path / "db") == sorted(recs)


def test_empty_partition_is_a_version_without_ssts(tmp_path: Path) -> None:
    out = build_rocksdb_checkpoint([], 3)
    assert out.ssts == {} and out.metadata.sst_files == () and out.metadata.num_keys == 0
    assert read_back(dict(out.files()), tmp_path) == []


def test_template_carries_column_families_and_counts_internal_keys() -> None:
    template = rocksdb_zip.parse_zip_metadata(
        "t",
        'v1\n{"sstFiles":[],"numKeys":9,"numInternalKeys":9,'
        '"columnFamilyMapping":{"default":1,"$rowCounter_x":2,"x":3},'
        '"columnFamilyTypeMap":{"default":false,"$rowCounter_x":true,"x":false},'
        '"maxColumnFamilyId":3}',
    )
    recs = [(b"\x01\x00\x00a", b"\x00"), (b"\x02\x00\x00b", b"\x00"), (b"\x03\x00\x00c", b"")]
    meta = build_rocksdb_checkpoint(recs, 5, VersionOptions(template=template)).metadata
    assert (meta.num_keys, meta.num_internal_keys) == (2, 1)
    assert meta.column_family_mapping == template.column_family_mapping
    assert meta.column_family_type_map == template.column_family_type_map
    assert meta.max_column_family_id == 3


@pytest.mark.parametrize("checksums", [False, True])
def test_list_values_are_joined_with_sparks_delimiter(checksums: bool) -> None:
    """A list read back through rocksdict has ``,`` between operands; Spark 4.3
    (mergeOperatorVersion 2) joins elements with nothing."""
    template = rocksdb_zip.parse_zip_metadata(
        "t",
        'v1\n{"sstFiles":[],"numKeys":0,"columnFamilyMapping":{"default":1,"events":2},'
        '"columnFamilyTypeMap":{"default":false,"events":false},"maxColumnFamilyId":2}',
    )
    key = b"\x02\x00\x00k"

    def element(row: bytes) -> bytes:
        body = b"\x00" + row
        if not checksums:
            return len(body).to_bytes(4, "little") + body
        inner = len(body).to_bytes(4, "little") + body
        crc = checksums_crc(key, inner)
        return crc + len(inner).to_bytes(4, "little") + inner

    elements = [element(b"a" * 8), element(b"b" * 16), element(b"c" * 8)]
    merged = elements[0] + b"," + elements[1] + elements[2]
    other = (b"\x01\x00\x00k", b"\x00,x")  # not a list family: unchanged
    for delimiter in (b"", b","):
        out = build_rocksdb_checkpoint(
            [(key, merged), other],
            4,
            VersionOptions(
                template=template,
                list_families=["events", "absent"],
                delimiter=delimiter,
                row_checksums=checksums,
            ),
        )
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            got = dict(read_back(dict(out.files()), Path(tmp)))
        assert got[key] == delimiter.join(elements)
        assert got[other[0]] == other[1]
        assert len(split_list_value(got[key], key=key, checksums=checksums)) == 3


def checksums_crc(key: bytes, data: bytes) -> bytes:
    from ckpt_cli.formats.state_encoders import crc32c

    return crc32c(key, data).to_bytes(4, "little", signed=True)


def test_merge_delimiter_follows_the_pinned_conf() -> None:
    assert merge_delimiter({MERGE_CONF: "2"}) == b""
    assert merge_delimiter({MERGE_CONF: "1"}) == b","
    assert merge_delimiter({}) == b","


def test_spark35_template_keeps_its_fields() -> None:
    template = rocksdb_zip.parse_zip_metadata("t", 'v1\n{"sstFiles":[],"numKeys":-1}')
    meta = build_rocksdb_checkpoint(
        [(b"\x00k", b"\x00v")], 2, VersionOptions(template=template)
    ).metadata
    assert list(meta.raw) == ["sstFiles", "numKeys"] and meta.num_keys == -1


# -- the fixtures: newest version replaced by our snapshot -----------------------------------


@dataclass
class Replaced:
    version: int
    # Store directory -> the files we wrote there.
    written: dict[str, list[str]]


def stores(ckpt: Checkpoint) -> Iterable[tuple[int, str]]:
    for op_id, op in ckpt.operators.items():
        for name in op.stores:
            yield op_id, name


def _drop(root: Path, rel: str) -> None:
    for path in (root / rel, root / f"{rel}.crc"):
        path.unlink(missing_ok=True)
        (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def replace_newest_version(src: Path, dst: Path) -> Replaced:
    """Copy ``src`` to ``dst`` and replace each partition's files of state version
    ``latest committed batch + 1`` by a full snapshot of the same records, written by our
    functions: HDFS ``N.snapshot``; RocksDB ``N.zip`` / ``N_<same id>.zip`` + new SSTs."""
    shutil.copytree(src, dst)
    ckpt = ckpt_cli.open(str(dst))
    latest = ckpt.batches.latest_committed
    assert latest is not None
    version = latest + 1
    checksummed = row_checksums(ckpt.conf)
    written: dict[str, list[str]] = {}
    for op_id, name in stores(ckpt):
        store = ckpt.operators[op_id].stores[name]
        for part in store.partitions.values():
            plan = plan_version(ckpt, op_id, part.id, version, store=name)
            rocks = store.provider == "rocksdb"
            recs = list(iter_state(ckpt, plan, checksummed=checksummed and rocks))
            old = part.versions.get(version)
            old_files = old.files if old else []
            # Spark's CRC32C sidecar exists beside the state files of format v2 (4.1+).
            sidecar = any((dst / f"{f.path}.crc").exists() for f in old_files)
            for f in old_files:
                _drop(dst, f.path)
            out: list[tuple[str, bytes]]
            if rocks:
                zips = [f for f in part.files if f.kind is FileKind.ZIP and f.version != version]
                newest = max(zips, key=lambda f: f.version or 0, default=None)
                template = read_zip_metadata(ckpt.storage, newest.path, None) if newest else None
                files = build_rocksdb_checkpoint(
                    recs,
                    version,
                    VersionOptions(
                        unique_id=plan.unique_id,
                        template=template,
                        checksum_file=sidecar,
                        list_families=list_families(ckpt, op_id),
                        delimiter=merge_delimiter(ckpt.conf),
                        row_checksums=checksummed,
                    ),
                )
                out = files.files(hadoop_crc=True)
            else:
                # The HDFS reader stripped the row checksums; the file keeps them.
                data = encode_hdfs_snapshot(recs, codec_of(ckpt), row_checksums=checksummed)
                out = [(f"{version}.snapshot", data)]
                if sidecar:
                    out.append((f"{version}.snapshot.crc", checksums.spark_checksum_bytes(data)))
                hidden = [(f".{p}.crc", checksums.hadoop_crc_bytes(d)) for p, d in out]
                out += hidden
            for rel, data in out:
                path = dst / part.path / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            written[part.path] = [rel for rel, _ in out]
    return Replaced(version, written)


def selections(ckpt: Checkpoint, op_id: int, store: str) -> list[dict[str, Any]]:
    """Every read ``ckpt replay`` offers of a store: each transformWithState variable and
    the timers, each family of a join of formats 3/4, else the store itself."""
    return [read or {"store": store} for read in covering_reads(ckpt, op_id)]


def canon_rows(ckpt: Checkpoint, op_id: int, selection: dict[str, Any]) -> list[str]:
    rows = read_state(ckpt, operator=op_id, **selection)
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def raw_state(ckpt: Checkpoint, op_id: int, store: str, version: int) -> list[list[Any]]:
    """Every partition's (key, value) bytes at ``version``, as stored; a list value as its
    elements (the delimiter between them is the reader's, see ``build_rocksdb_checkpoint``)."""
    checksummed = row_checksums(ckpt.conf)
    out = []
    for part_id, part in sorted(ckpt.operators[op_id].stores[store].partitions.items()):
        zips = [f for f in part.files if f.kind is FileKind.ZIP]
        newest = max(zips, key=lambda f: f.version or 0, default=None)
        mapping = (
            read_zip_metadata(ckpt.storage, newest.path, None).column_family_mapping
            if newest
            else {}
        )
        lists = {mapping[n] for n in list_families(ckpt, op_id) if n in mapping}
        plan = plan_version(ckpt, op_id, part_id, version, store=store)
        rows: list[Any] = []
        for key, value in iter_state(ckpt, plan, checksummed=checksummed):
            if lists and split_column_family(key)[0] in lists:
                split = split_list_value(value, key=key, checksums=checksummed)
                rows.append((key, [e.data for e in split]))
            else:
                rows.append((key, value))
        out.append(sorted(rows))
    return out


def finding_codes(ckpt: ckpt_cli.Checkpoint) -> list[str]:
    report = ckpt.validate(deep=True, all_versions=True)
    return sorted(f.code for f in report.findings if f.severity != "info")


@pytest.mark.parametrize(("name", "src"), CASES, ids=[name for name, _ in CASES])
def test_replaced_newest_version_replays_and_validates_the_same(
    name: str, src: Path, tmp_path: Path
) -> None:
    replaced = replace_newest_version(src, tmp_path / name)
    assert replaced.written
    for files in replaced.written.values():
        assert not any(f.endswith((".changelog", ".delta")) for f in files)
    ours = ckpt_cli.open(str(tmp_path / name))
    spark = ckpt_cli.open(str(src))
    # Our files are the newest version's only ones, and the rows are Spark's.
    for op_id, store in stores(spark):
        for part in ours.operators[op_id].stores[store].partitions.values():
            kinds = {f.kind for f in part.versions[replaced.version].files}
            assert kinds & {FileKind.SNAPSHOT, FileKind.ZIP}
            assert not kinds & {FileKind.DELTA, FileKind.CHANGELOG}
        assert raw_state(ours, op_id, store, replaced.version) == raw_state(
            spark, op_id, store, replaced.version
        )
        for selection in selections(spark, op_id, store):
            assert canon_rows(ours, op_id, selection) == canon_rows(spark, op_id, selection)
    assert finding_codes(ours) == finding_codes(spark)


ROCKSDB_ZIPS = [
    pytest.param(name, src, id=name)
    for name, src in CASES
    if any(src.glob("state/*/*/*.zip")) or any(src.glob("state/*/*/*/*.zip"))
]


@pytest.mark.parametrize(("name", "src"), ROCKSDB_ZIPS)
def test_key_counts_equal_sparks(name: str, src: Path) -> None:
    """For every zip Spark wrote: our zip of the same records has its numKeys,
    numInternalKeys, column families and header."""
    ckpt = ckpt_cli.open(str(src))
    checked = 0
    for op_id, store in stores(ckpt):
        for part in ckpt.operators[op_id].stores[store].partitions.values():
            for f in part.files:
                if f.kind is not FileKind.ZIP or f.version is None:
                    continue
                spark = read_zip_metadata(ckpt.storage, f.path, None)
                plan = plan_version(
                    ckpt, op_id, part.id, f.version, store=store, unique_id=f.unique_id
                )
                recs = iter_state(ckpt, plan, checksummed=row_checksums(ckpt.conf))
                ours = build_rocksdb_checkpoint(
                    recs, f.version, VersionOptions(template=spark)
                ).metadata
                assert (ours.num_keys, ours.num_internal_keys) == (
                    spark.num_keys,
                    spark.num_internal_keys,
                ), f.path
                assert list(ours.raw) == [k for k in spark.raw if k != "logFiles"]
                assert ours.version == spark.version
                assert ours.column_family_mapping == spark.column_family_mapping
                checked += 1
    assert checked
