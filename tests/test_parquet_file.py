"""``replay/parquet_file``: row groups encoded on 1-8 threads, slow or failing, after 0-8
serial ones, make the file one writer makes, byte for byte; a failure is the encoder's own
error with every encoder stopped; at most one row group per encoder is in flight."""

from __future__ import annotations

import io
import random
import threading
import time
from typing import Any

import pytest

from ckpt_cli.replay import parquet_file, sinks

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _tables(count: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    tables = []
    for i in range(count):
        rows = rng.choice([0, 1, 5, 40, 300])
        tables.append(
            pa.table(
                {
                    "partition_id": pa.array([i] * rows, pa.int64()),
                    "key": pa.array(
                        [{"k": f"key-{i}-{j}"} for j in range(rows)],
                        pa.struct([("k", pa.string())]),
                    ),
                    "value": pa.array(
                        [rng.choice([None, rng.random()]) for _ in range(rows)], pa.float64()
                    ),
                }
            )
        )
    return tables


def _written(tables: list[Any], encoders: int) -> bytes:
    out = io.BytesIO()
    assert sinks.write_tables(iter(tables), out, encoders) == sum(t.num_rows for t in tables)
    return out.getvalue()


def _encoder_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("ckpt-parquet-")]


def _slowed(monkeypatch: pytest.MonkeyPatch, seed: int, fail_at: int | None = None) -> None:
    """Each row group waits 0-3 ms before it is encoded (encoders fall behind one another);
    the ``fail_at``-th raises instead."""
    rng = random.Random(seed)
    lock = threading.Lock()
    calls = iter(range(1 << 30))
    original = parquet_file._Encoder._encode

    def slow(self: Any, table: Any, rows: int) -> Any:
        with lock:
            n, wait = next(calls), rng.choice([0, 0, 0.001, 0.003])
        time.sleep(wait)
        if n == fail_at:
            raise OSError(f"encoder failed on row group {n}")
        return original(self, table, rows)

    monkeypatch.setattr(parquet_file._Encoder, "_encode", slow)


@pytest.fixture(params=[0, 3, 8], ids=lambda n: f"serial{n}")
def serial(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many row groups one encoder takes before the others start."""
    monkeypatch.setattr(parquet_file, "SERIAL_ROW_GROUPS", request.param)
    return int(request.param)


@pytest.mark.parametrize("encoders", [2, 3, 8])
@pytest.mark.parametrize(("count", "group_rows"), [(1, 7), (1, 1 << 17), (30, 7), (60, 100)])
def test_any_number_of_slow_encoders_makes_one_writers_file(
    monkeypatch: pytest.MonkeyPatch, encoders: int, count: int, group_rows: int, serial: int
) -> None:
    monkeypatch.setattr(sinks, "ROW_GROUP_ROWS", group_rows)
    tables = _tables(count, seed=count + encoders)
    expected = _written(tables, 1)
    _slowed(monkeypatch, seed=encoders)
    got = _written(tables, encoders)
    assert got == expected
    parquet = pq.ParquetFile(io.BytesIO(got))
    assert parquet.read().equals(pa.concat_tables(tables))
    if group_rows == 7:
        assert parquet.num_row_groups >= min(count, 2)
    assert _encoder_threads() == []


def test_no_rows_on_several_encoders_is_a_file_of_the_schema(serial: int) -> None:
    empty = _tables(1, seed=0)[0].slice(0, 0)
    assert _written([empty], 4) == _written([empty], 1)
    assert pq.read_table(io.BytesIO(_written([empty], 4))).equals(empty)


@pytest.mark.parametrize("encoders", [2, 3, 8])
@pytest.mark.parametrize("fail_at", [0, 1, 5, 29])
def test_a_failing_encoder_is_its_own_error_and_stops_every_encoder(
    monkeypatch: pytest.MonkeyPatch, encoders: int, fail_at: int, serial: int
) -> None:
    monkeypatch.setattr(sinks, "ROW_GROUP_ROWS", 1)
    tables = [t for t in _tables(40, seed=3) if t.num_rows][:30]
    _slowed(monkeypatch, seed=fail_at, fail_at=fail_at)
    with pytest.raises(OSError, match=f"encoder failed on row group {fail_at}$"):
        _written(tables, encoders)
    assert _encoder_threads() == []


def test_a_failing_source_stops_every_encoder(serial: int) -> None:
    tables = _tables(10, seed=4)

    def source() -> Any:
        yield from tables
        raise RuntimeError("the decoder failed")

    with pytest.raises(RuntimeError, match="the decoder failed"):
        sinks.write_tables(source(), io.BytesIO(), 3)
    assert _encoder_threads() == []


@pytest.mark.parametrize("encoders", [2, 3, 8])
def test_at_most_one_row_group_per_encoder_in_flight(
    monkeypatch: pytest.MonkeyPatch, encoders: int, serial: int
) -> None:
    """Taken from the source minus written to the file never passes one per encoder, plus
    the one being handed over (none while the first row groups are encoded alone), however
    slow the encoders are."""
    monkeypatch.setattr(sinks, "ROW_GROUP_ROWS", 1)
    _slowed(monkeypatch, seed=encoders)
    tables = [t for t in _tables(80, seed=5) if t.num_rows][:50]
    out = io.BytesIO()
    written = 0
    real_write = out.write
    most_serial = 0

    def write(data: Any) -> int:
        nonlocal written
        written += 1
        return real_write(data)

    out.write = write  # type: ignore[method-assign]
    most = 0

    def source() -> Any:
        nonlocal most, most_serial
        for taken, table in enumerate(tables, 1):
            # The magic is the first write; each row group one more.
            ahead = taken - max(written - 1, 0)
            if taken <= serial + 1:
                most_serial = max(most_serial, ahead)
            else:
                most = max(most, ahead)
            yield table

    sinks.write_tables(source(), out, encoders)
    assert most_serial <= 1
    assert 2 < most <= encoders + 1  # more than one encoder did work at once


def test_another_schema_is_an_error() -> None:
    tables = _tables(3, seed=6)
    other = pa.table({"partition_id": pa.array([1], pa.int64())})
    with pytest.raises(ValueError, match="schema"):
        _written([*tables, other], 3)
    assert _encoder_threads() == []


def test_a_row_group_larger_than_its_size_is_refused() -> None:
    table = _tables(1, seed=0)[0]
    if table.num_rows < 2:
        table = pa.concat_tables([table, table, _tables(1, seed=2)[0]])
    writer = parquet_file.ParquetFile(io.BytesIO(), table.schema, 2)
    try:
        with pytest.raises(ValueError, match="more than one row group"):
            writer.write_table(table, table.num_rows - 1)
    finally:
        writer.abandon()
    assert _encoder_threads() == []


def _synthetic(root: Any, partitions: int) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from synthetic import build

    build(root, partitions=partitions, versions=2, keys=8_000, snapshot_every=100, crc=False)


@pytest.mark.parametrize("partitions", [1, 400])
def test_replays_of_1_to_400_partitions_on_any_pool_finish_in_order_or_fail_in_one_line(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    """A replay to one Parquet file, its row groups (of 50 rows) shared by every encoder and
    slowed at random: the same bytes on pools of 1-8, rows in partition order. With the last
    partition's delta cut short, every pool stops with that file's own one-line error after
    the encoders took row groups, and no encoder thread is left."""
    from ckpt_cli.formats.compression import compress, decompressed_chunks
    from ckpt_cli.replay import read_state
    from tests.conftest import run_cli

    root = tmp_path / "ckpt"
    _synthetic(root, partitions)
    monkeypatch.setattr(sinks, "ROW_GROUP_ROWS", 50)
    monkeypatch.setattr(parquet_file, "SERIAL_ROW_GROUPS", 0)
    _slowed(monkeypatch, seed=partitions)

    def replayed(workers: int) -> bytes:
        out = io.BytesIO()
        sinks.write_state_parquet(read_state(str(root)), out, workers=workers)
        return out.getvalue()

    expected = replayed(1)
    table = pq.read_table(io.BytesIO(expected))
    ids = table["partition_id"].to_pylist()
    assert table.num_rows == 8_000 and ids == sorted(ids) and len(set(ids)) == partitions
    for workers in (2, 3, 8):
        assert replayed(workers) == expected, workers
    assert _encoder_threads() == []

    last = partitions - 1
    delta = root / f"state/0/{last}/2.delta"
    with open(delta, "rb") as fh:
        data = b"".join(decompressed_chunks(str(delta), fh, codec="lz4"))
    delta.write_bytes(compress(data[:-9], "lz4"))  # a record cut short, no end marker
    encoded = 0
    encode = parquet_file._Encoder._encode

    def counted(self: Any, table: Any, rows: int) -> Any:
        nonlocal encoded
        encoded += 1
        return encode(self, table, rows)

    monkeypatch.setattr(parquet_file._Encoder, "_encode", counted)
    errors = set()
    for pool in ("1", "2", "3", "8"):
        encoded = 0
        done = run_cli("replay", str(root), "-o", str(tmp_path / "out.parquet"), "--workers", pool)
        assert done.exit_code == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines[0].startswith(f"error: state/0/{last}/2.delta"), done.stderr
        assert "Traceback" not in done.stderr and len(lines) <= 2  # the error and its hint
        errors.add(lines[0])
        if partitions > 1 and pool != "1":
            assert encoded > 2 * int(pool)  # row groups were in flight when it failed
        assert _encoder_threads() == []
    assert len(errors) == 1
