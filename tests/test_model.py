from __future__ import annotations

from pathlib import Path

import pytest

from ckpt_cli.core.layout import classify
from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.errors import CkptError, NotACheckpoint
from ckpt_cli.storage import FileEntry, Storage
from tests.tree import UUID1, UUID2, commit, offsets, write_tree


def kind(path: str) -> FileKind:
    return classify(FileEntry(path, 1, None)).kind


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata", FileKind.METADATA),
        (".metadata.crc", FileKind.HADOOP_CRC),
        ("offsets/3", FileKind.OFFSETS),
        ("offsets/.3.crc", FileKind.HADOOP_CRC),
        (f"offsets/.4.{UUID1}.tmp", FileKind.TEMP),
        ("offsets/notes.txt", FileKind.UNKNOWN),
        ("commits/3", FileKind.COMMIT),
        ("sources/0/2", FileKind.SOURCE_LOG),
        ("sources/0/9.compact", FileKind.SOURCE_LOG),
        ("state/0/_metadata/metadata", FileKind.OPERATOR_METADATA),
        ("state/0/_metadata/v2/4", FileKind.OPERATOR_METADATA),
        (f"state/0/_stateSchema/default/0_{UUID1}", FileKind.STATE_SCHEMA),
        ("state/0/0/_metadata/schema", FileKind.STATE_SCHEMA),
        ("state/0/0/1.delta", FileKind.DELTA),
        ("state/0/0/.1.delta.crc", FileKind.HADOOP_CRC),
        (f"state/0/0/.2.delta.{UUID1}.TID7.tmp", FileKind.TEMP),
        ("state/0/0/4.snapshot", FileKind.SNAPSHOT),
        ("state/0/1/3.zip", FileKind.ZIP),
        ("state/0/1/3.changelog", FileKind.CHANGELOG),
        (f"state/0/1/3_{UUID1}.zip", FileKind.ZIP),
        (f"state/0/1/3_{UUID1}.zip.crc", FileKind.SPARK_CHECKSUM),
        (f"state/0/1/SSTs/000008-{UUID1}.sst", FileKind.SST),
        (f"state/0/1/logs/000004-{UUID1}.log", FileKind.ROCKSDB_LOG),
        ("state/0/1/SSTs/readme", FileKind.UNKNOWN),
        ("state/1/0/left-keyToNumValues/1.delta", FileKind.DELTA),
        ("state/1/0/left-keyToNumValues/_metadata/schema", FileKind.STATE_SCHEMA),
        ("state/0/0/weird.bin", FileKind.UNKNOWN),
        ("state/x/0/1.delta", FileKind.UNKNOWN),
        ("_spark_metadata/0", FileKind.UNKNOWN),
    ],
)
def test_classify(path: str, expected: FileKind) -> None:
    assert kind(path) is expected


def test_store_locations() -> None:
    join = classify(FileEntry("state/1/3/right-keyWithIndexToValue/SSTs/a.sst", 1, None))
    assert join.store is not None
    assert (join.store.operator, join.store.partition, join.store.store) == (
        1,
        3,
        "right-keyWithIndexToValue",
    )
    temp = classify(FileEntry(f"state/0/0/.5.delta.{UUID1}.tmp", 1, None))
    assert temp.target == "state/0/0/5.delta"
    crc = classify(FileEntry(f"state/0/0/.5_{UUID1}.zip.crc.crc", 1, None))
    assert crc.kind is FileKind.HADOOP_CRC and crc.target == f"state/0/0/5_{UUID1}.zip.crc"


def make_checkpoint(tmp_path: Path) -> Checkpoint:
    files: dict[str, bytes] = {"metadata": b'{"id":"q-1"}'}
    for b in (3, 4, 5, 7, 8):  # offsets 6 missing; 8 has no commit
        files[f"offsets/{b}"] = offsets(b)
    for b in (3, 4, 5, 7):
        files[f"commits/{b}"] = commit(b)
    for p in (0, 1):
        for v in (4, 5, 6, 7, 8):
            files[f"state/0/{p}/{v}.delta"] = b"x" * v
        files[f"state/0/{p}/6.snapshot"] = b"snap"
    files[f"state/0/0/.9.delta.{UUID1}.TID3.tmp"] = b""
    for store in ("left-keyToNumValues", "right-keyWithIndexToValue"):
        files[f"state/1/0/{store}/8.delta"] = b"d"
    files[f"state/2/0/3_{UUID1}.zip"] = b"z"
    files[f"state/2/0/3_{UUID2}.zip"] = b"z"
    files[f"state/2/0/4_{UUID1}.changelog"] = b"c"
    files[f"state/2/0/SSTs/000001-{UUID1}.sst"] = b"s" * 10
    files["stray.txt"] = b"?"
    write_tree(tmp_path, files)
    return Checkpoint.open(str(tmp_path))


def test_batches(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    b = ckpt.batches
    assert b.offsets == (3, 4, 5, 7, 8)
    assert b.commits == (3, 4, 5, 7)
    assert b.latest_committed == 7
    assert b.in_flight == (8,)
    assert b.offsets_gaps == (6,)
    assert b.commits_gaps == (6,)
    assert b.commits_without_offsets == ()
    assert ckpt.query_id == "q-1"
    assert ckpt.latest_offsets is not None and ckpt.latest_offsets.shuffle_partitions == 2


def test_state_tree(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    assert list(ckpt.operators) == [0, 1, 2]
    agg = ckpt.operators[0].stores["default"]
    assert agg.provider == "hdfs"
    assert list(agg.partitions) == [0, 1]
    p0 = agg.partitions[0]
    assert p0.version_ids == [4, 5, 6, 7, 8]
    assert p0.snapshot_versions == [6]
    assert len(p0.files) == 7  # 5 deltas, 1 snapshot, 1 temp file
    assert p0.bytes == sum(range(4, 9)) + 4
    join = ckpt.operators[1]
    assert list(join.stores) == ["left-keyToNumValues", "right-keyWithIndexToValue"]
    rocks = ckpt.operators[2].stores["default"].partitions[0]
    assert ckpt.operators[2].stores["default"].provider == "rocksdb"
    assert rocks.versions[3].unique_ids == sorted([UUID1, UUID2])
    assert rocks.snapshot_versions == [3]
    assert [f.path for f in rocks.shared_files] == [f"state/2/0/SSTs/000001-{UUID1}.sst"]
    assert [f.path for f in ckpt.temp_files] == [f"state/0/0/.9.delta.{UUID1}.TID3.tmp"]
    assert [f.path for f in ckpt.unknown_files] == ["stray.txt"]


def test_memory_filesystem_gives_the_same_model(tmp_path: Path) -> None:
    local = make_checkpoint(tmp_path)
    import fsspec

    mem = fsspec.filesystem("memory")
    for f in local.files:
        mem.pipe_file(f"/modeltest/{f.path}", (tmp_path / f.path).read_bytes())
    remote = Checkpoint.open("memory://modeltest")
    assert [(f.path, f.kind, f.entry.size) for f in remote.files] == [
        (f.path, f.kind, f.entry.size) for f in local.files
    ]
    assert remote.batches == local.batches
    assert remote.storage.stats.list == 1
    mem.rm("/modeltest", recursive=True)


def test_lazy_reads(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    assert ckpt.storage.stats.files_read == 0  # opening reads nothing
    ckpt.batches  # noqa: B018 - the listing alone answers this
    assert ckpt.storage.stats.files_read == 0
    ckpt.latest_offsets  # noqa: B018
    assert ckpt.storage.stats.files_read == 1


def test_not_a_checkpoint(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a/b.txt": b"x", "c.parquet": b"y"})
    with pytest.raises(NotACheckpoint, match="not a Spark checkpoint"):
        Checkpoint.open(str(tmp_path))


def test_offsets_not_listed(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    with pytest.raises(CkptError, match="offsets/6"):
        ckpt.offsets(6)


def test_storage_roundtrip_memory() -> None:
    storage = Storage.from_url("memory://nothing-here")
    with pytest.raises(CkptError, match="no such file"):
        storage.list_all()
