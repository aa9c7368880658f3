"""`ckpt repartition` in bounded memory: the staged records streamed in pieces, each new
partition's files built on local disk and uploaded streamed, a RocksDB version larger than
the writer's memtable flushed to several SSTs that read back whole."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import CkptError
from ckpt_cli.formats import checksums, rocksdb, rocksdb_write, rocksdb_zip
from ckpt_cli.repartition import writers
from ckpt_cli.repartition.placement import staged_pieces, staged_records
from ckpt_cli.storage import Storage


def _staged(recs: list[tuple[bytes, bytes]]) -> bytes:
    pack = struct.Struct(">i").pack
    return b"".join(pack(len(k)) + k + pack(len(v)) + v for k, v in recs)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.binary(max_size=30), st.binary(max_size=60)), max_size=30),
    st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=8),
)
def test_staged_records_read_back_however_the_bytes_are_cut(
    recs: list[tuple[bytes, bytes]], cuts: list[int]
) -> None:
    data = _staged(recs)
    pieces, at, i = [], 0, 0
    while at < len(data):
        size = cuts[i % len(cuts)]
        pieces.append(data[at : at + size])
        at, i = at + size, i + 1
    assert list(staged_records(pieces)) == recs


def test_staged_records_cut_short_are_an_error() -> None:
    data = _staged([(b"key", b"value")])
    with pytest.raises(CkptError, match="middle of a record"):
        list(staged_records([data[:-1]]))


def test_staged_pieces_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ckpt_cli.repartition.placement._PIECE", 7)
    path = tmp_path / "staged"
    path.write_bytes(bytes(range(50)))
    with open(path, "rb") as fh:
        pieces = list(staged_pieces(fh.read))
    assert max(map(len, pieces)) == 7 and b"".join(pieces) == bytes(range(50))


def test_hadoop_crc_of_a_file_in_pieces_equals_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writers, "_READ", 1024)  # several pieces, each whole checksum chunks
    data = bytes(i * 7 % 251 for i in range(5000))
    (tmp_path / "f").write_bytes(data)
    pairs = writers._with_crc("SSTs/f", tmp_path / "f")
    assert [name for name, _ in pairs] == ["SSTs/f", "SSTs/.f.crc"]
    assert pairs[1][1].read_bytes() == checksums.hadoop_crc_bytes(data)


def test_write_file_is_contained_and_atomic(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    root.mkdir()
    local = tmp_path / "built"
    local.write_bytes(b"x" * 3_000_000)
    storage = Storage.from_url(str(root))
    storage.write_file("state/0/1/SSTs/a.sst", str(local), atomic=True)
    assert (root / "state/0/1/SSTs/a.sst").read_bytes() == local.read_bytes()
    assert [p.name for p in (root / "state/0/1/SSTs").iterdir()] == ["a.sst"]  # no temp left
    with pytest.raises(CkptError):
        storage.write_file("../outside", str(local), atomic=True)
    assert not (tmp_path / "outside").exists()


def test_a_version_larger_than_the_memtable_is_several_ssts_that_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rocksdb_write, "_WRITE_BUFFER", 64 << 10)
    recs = {b"\x00key-%06d" % (i * 7919 % 20_000): b"value-%d" % i * 3 for i in range(20_000)}
    written = rocksdb_write.write_rocksdb_checkpoint(recs.items(), 4, tmp_path / "out")
    ssts = [n for n in written.names if n.startswith("SSTs/")]
    assert len(ssts) > 1 and written.names[-1] == "4.zip"
    assert written.metadata.num_keys == len(recs)
    assert {f"SSTs/{f.dfs_file_name}" for f in written.metadata.sst_files} == set(ssts)
    for f in written.metadata.sst_files:
        assert (tmp_path / "out" / "SSTs" / f.dfs_file_name).stat().st_size == f.size_bytes
    files = {n: (tmp_path / "out" / n).read_bytes() for n in written.names}
    db = tmp_path / "db"
    rocksdb_zip.rebuild_db_dir(files["4.zip"], files.__getitem__, db)
    assert list(rocksdb.iter_db(db)) == sorted(recs.items())
