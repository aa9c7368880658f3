"""Every reader of a checkpoint file, fed mutated copies of real fixture files or arbitrary
bytes, returns a result or raises the project's FormatError naming the file: never another
exception, never a hang. (Delta/snapshot/changelog streams: tests/formats/test_streams.py;
UnsafeRow: tests/formats/test_unsaferow.py.)"""

from __future__ import annotations

import io
import random
import struct
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import checksums, logs, rocksdb, rocksdb_zip
from ckpt_cli.formats.state_schema import parse_state_schema
from tests.conftest import CASES_DIR

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")


def zip_metadata(data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return zf.read("metadata")


def real(pattern: str, limit: int = 12) -> list[bytes]:
    inner = pattern.endswith("!metadata")
    paths = sorted(p for p in CASES_DIR.glob(pattern.removesuffix("!metadata")) if p.is_file())
    step = max(1, len(paths) // limit)
    seeds = [p.read_bytes() for p in paths[::step]]
    return [zip_metadata(d) for d in seeds] if inner else seeds or [b""]


def mutated(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    @st.composite
    def strategy(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(1, 4))):
            if not data:
                break
            at = draw(st.integers(0, len(data) - 1))
            op = draw(st.sampled_from(["flip", "cut", "insert", "int", "zero"]))
            if op == "flip":
                data[at] ^= draw(st.integers(1, 255))
            elif op == "cut":
                del data[at:]
            elif op == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=16))
            elif op == "int":
                data[at : at + 4] = struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1)))
            else:
                data[at : at + 16] = bytes(16)
        return bytes(data)

    return st.one_of(strategy(), st.binary(max_size=200))


FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

READERS: dict[str, tuple[str, Callable[[str, bytes], Any]]] = {
    "offsets": ("*/checkpoint/offsets/[0-9]*", lambda p, d: logs.parse_offsets(p, 1, d)),
    "commits": ("*/checkpoint/commits/[0-9]*", lambda p, d: logs.parse_commit(p, 1, d)),
    "metadata": ("*/checkpoint/metadata", logs.parse_stream_metadata),
    "operator metadata": ("*/checkpoint/state/*/_metadata/metadata", logs.parse_operator_metadata),
    "state schema": ("*/checkpoint/state/*/0/**/_metadata/schema", parse_state_schema),
    "zip": ("*/checkpoint/state/*/*/*.zip", rocksdb_zip.read_zip),
    "zip metadata": ("*/checkpoint/state/*/*/*.zip!metadata", rocksdb_zip.parse_zip_metadata),
    "file source log": ("*/checkpoint/sources/*/[0-9]*", logs.parse_file_source_log),
    "hadoop crc": ("*/checkpoint/**/.*.crc", checksums.parse_hadoop_crc),
    "spark checksum": ("*/checkpoint/state/*/*/[0-9]*.crc", checksums.parse_spark_checksum),
}


def _cases() -> list[Any]:
    return [
        pytest.param(pattern, reader, mutated(real(pattern)), id=name)
        for name, (pattern, reader) in READERS.items()
    ]


@pytest.mark.parametrize(("pattern", "reader", "strategy"), _cases())
def test_reader_on_real_files_then_fuzzed(
    pattern: str, reader: Callable[[str, bytes], Any], strategy: st.SearchStrategy[bytes]
) -> None:
    for data in real(pattern):
        reader("real", data)  # the unmodified files parse

    @FUZZ
    @given(data=strategy)
    def fuzz(data: bytes) -> None:
        try:
            reader("fuzzed-file", data)
        except FormatError as exc:
            assert str(exc).startswith("fuzzed-file")

    fuzz()


def test_corrupt_sst_data_is_an_error_or_the_right_keys() -> None:
    """Damaged SSTs: RocksDB's block checksums (verified on read) or its open must refuse
    them; when a change misses every checked block, the keys must still be all there."""
    store = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint" / "state" / "0" / "0"
    zip_path = max(store.glob("*.zip"), key=lambda p: int(p.stem))
    zip_bytes = zip_path.read_bytes()
    meta = rocksdb_zip.read_zip(zip_path.name, zip_bytes).metadata
    rng = random.Random(7)
    errors = 0
    for trial in range(40):

        def fetch(rel: str, flip: bool = bool(trial % 2)) -> bytes:
            data = bytearray((store / rel).read_bytes())
            at = rng.randrange(len(data))
            if flip:
                data[at] ^= 0xFF
            else:
                data[at : at + 32] = bytes(32)
            return bytes(data)

        with tempfile.TemporaryDirectory() as tmp:
            try:
                rocksdb_zip.rebuild_db_dir(zip_bytes, fetch, tmp, path=zip_path.name)
                keys = [k for k, _ in rocksdb.iter_db(tmp)]
            except FormatError:
                errors += 1
                continue
        assert len(keys) == meta.num_keys
    assert errors > 30


def test_unzip_refuses_paths_outside_the_directory(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../escape", b"x")
        zf.writestr("metadata", 'v1\n{"sstFiles":[],"numKeys":0}')
    with pytest.raises(FormatError, match="unexpected zip entry name"):
        rocksdb_zip.rebuild_db_dir(buf.getvalue(), lambda rel: b"", tmp_path / "db", path="1.zip")
    assert not (tmp_path / "escape").exists()
