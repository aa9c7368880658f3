"""Replay in columns (``replay/columns``) against the row path it replaces: byte-identical
JSON lines and the same rows in Arrow, on every fixture's stores and on synthetic rows with
the values that need care (escapes, floats, old dates, nulls, nesting, damaged bytes)."""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.core.model import DEFAULT_STORE, Checkpoint
from ckpt_cli.core.read import iter_state
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.replay import read_state
from ckpt_cli.state.columns import Columnar, columnar_for, line_chunks
from ckpt_cli.state.decoders import RowDecoder
from ckpt_cli.state.plain_arrow import RowPath
from tests.conftest import CASES, CASES_DIR, Case
from tests.formats.test_unsaferow import field, values_for, write_row
from tests.test_state_vs_spark import READS, _canon, _spark_rows

pa = pytest.importorskip("pyarrow")

UTC = dt.timezone.utc


def _row_lines(decoder: RowDecoder, pid: int, pairs: list[tuple[bytes, bytes]]) -> str:
    return "".join(decoder.line(pid, k, v) for k, v in pairs)


def _row_table(columnar: Columnar, pid: int, pairs: list[tuple[bytes, bytes]]) -> Any:
    rows = [columnar.decoder.row(pid, k, v) for k, v in pairs]
    return pa.Table.from_pylist(rows, schema=columnar.arrow_schema)


def _stores(root: Path) -> list[tuple[int, str]]:
    ckpt = Checkpoint.open(str(root))
    return [(op.id, name) for op in ckpt.operators.values() for name in op.stores]


@pytest.mark.skipif(not CASES, reason="no fixtures")
@pytest.mark.parametrize("case", sorted(p.name for p in CASES_DIR.iterdir() if p.is_dir()))
def test_fixture_stores_replay_alike_in_columns(case: str) -> None:
    """Every store of every fixture the columnar path covers: the same bytes and rows."""
    root = CASES_DIR / case / "checkpoint"
    covered = 0
    for operator, store in _stores(root):
        try:
            rows = read_state(str(root), operator=operator, store=store)
        except Exception:  # noqa: BLE001 - stores a plain read refuses (state variables...)
            continue
        columnar = columnar_for(rows.decoder) if rows.state_var is None else None
        if columnar is None:
            continue
        for plan in rows.plans:
            pairs = list(iter_state(rows.ckpt, plan))
            assert columnar.lines(plan.partition, pairs) == _row_lines(
                rows.decoder, plan.partition, pairs
            )
            assert columnar.table(plan.partition, pairs).equals(
                _row_table(columnar, plan.partition, pairs)
            )
            covered += len(pairs)
    if case.endswith("-agg"):
        assert covered  # the aggregations' stores are all columnar


def _decoder(key: S.StructType, value: S.StructType, provider: str = "hdfs") -> RowDecoder:
    return RowDecoder(StateSchema(key, value, 2), provider)


def _pairs(key: S.StructType, value: S.StructType, rows: list[tuple[Any, Any]]) -> list[Any]:
    return [(write_row(key, k), write_row(value, v)) for k, v in rows]


KEY = S.StructType((field("k", S.STRING), field("day", S.DATE)))
VALUE = S.StructType(
    (
        field("n", S.LONG),
        field("f", S.FLOAT),
        field("d", S.DOUBLE),
        field("ts", S.TIMESTAMP),
        field("ntz", S.TIMESTAMP_NTZ),
        field("ok", S.BOOLEAN),
        field("none", S.NULL),
    )
)
NESTED = S.StructType(
    (
        field("w", S.StructType((field("start", S.TIMESTAMP), field("end", S.TIMESTAMP)))),
        field("tags", S.ArrayType(S.STRING)),
        field("amount", S.DecimalType(12, 3)),
        field("ym", S.YearMonthIntervalType()),
        field("dt", S.DayTimeIntervalType()),
        field("small", S.ArrayType(S.SHORT)),
        field("b", S.BINARY),
    )
)


def _float32(x: float) -> float:
    value: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return value


def _tricky_rows() -> list[tuple[Any, Any]]:
    strings = ["plain", 'quote " and \\ back', "tab\tnew\nline\x01\x1f", "ünï ✓ 😀", ""]
    floats = [0.0, -0.0, 1.5, 1e20, 1e-7, 1.2345678901234567e300, 3.4028234663852886e38]
    floats32 = [0.0, -0.0, 1.5, 1e20, 1e-7, 3.4028234663852886e38, 1e-40]
    stamps = [
        dt.datetime(1, 1, 1, tzinfo=UTC),
        dt.datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        dt.datetime(2024, 2, 29, 12, 0, tzinfo=UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ]
    rows = []
    for i in range(40):
        ts = stamps[i % len(stamps)]
        key = {"k": strings[i % len(strings)] + str(i), "day": ts.date() if i % 7 else None}
        value = {
            "n": None if i % 5 == 0 else i * (-1) ** i * 10**15,
            "f": _float32(floats32[i % len(floats32)]),
            "d": None if i % 6 == 0 else floats[i % len(floats)],
            "ts": ts if i % 4 else None,
            "ntz": ts.replace(tzinfo=None),
            "ok": None if i % 3 == 0 else bool(i % 2),
            "none": None,
        }
        rows.append((key, value))
    return rows


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_tricky_flat_values_are_byte_identical(provider: str) -> None:
    decoder = _decoder(KEY, VALUE, provider)
    assert decoder.compiled  # floats written with repr, as the generated encoder does
    columnar = columnar_for(decoder)
    assert columnar is not None
    pairs = _pairs(KEY, VALUE, _tricky_rows())
    if provider == "rocksdb":
        pairs = [(b"\x00" + k, b"\x00" + v) for k, v in pairs]
    assert columnar.lines(3, pairs) == _row_lines(decoder, 3, pairs)
    assert columnar.table(3, pairs).equals(_row_table(columnar, 3, pairs))


def test_nested_values_are_byte_identical() -> None:
    decoder = _decoder(KEY, NESTED)
    assert not decoder.compiled  # floats through orjson, nested through the general path
    columnar = columnar_for(decoder)
    assert columnar is not None
    rows = []
    for i, (key, _) in enumerate(_tricky_rows()):
        start = dt.datetime(2020, 1, 1, tzinfo=UTC) + dt.timedelta(minutes=i)
        rows.append(
            (
                key,
                {
                    "w": None if i % 9 == 0 else {"start": start, "end": None if i % 2 else start},
                    "tags": None
                    if i % 4 == 0
                    else [None if j == 1 else f'"t{j}' for j in range(i % 4)],
                    "amount": None if i % 5 == 0 else Decimal(i * 1001 - 20000).scaleb(-3),
                    "ym": i - 20,
                    "dt": dt.timedelta(microseconds=i * 123_456_789 - 10**9),
                    "small": [i, None, -i],
                    "b": bytes(range(i % 17)) if i % 3 else None,
                },
            )
        )
    pairs = _pairs(KEY, NESTED, rows)
    assert columnar.lines(0, pairs) == _row_lines(decoder, 0, pairs)
    assert columnar.table(0, pairs).equals(_row_table(columnar, 0, pairs))


def test_rows_the_columns_cannot_vouch_for_take_the_row_path() -> None:
    decoder = _decoder(KEY, VALUE)
    columnar = columnar_for(decoder)
    assert columnar is not None
    good = _pairs(KEY, VALUE, _tricky_rows()[:3])
    nan = _pairs(KEY, VALUE, [(_tricky_rows()[1][0], {**_tricky_rows()[1][1], "d": math.nan})])
    # A non-finite float is a string in the row path's JSON.
    text = columnar.lines(0, good + nan)
    assert text == _row_lines(decoder, 0, good + nan)
    assert json.loads(text.splitlines()[-1])["value"]["d"] == "nan"
    # A damaged row: the row path's own error, whichever path saw it first.
    damaged = [(good[0][0][:5], good[0][1])]
    with pytest.raises(FormatError) as rows_error:
        _row_lines(decoder, 0, good + damaged)
    with pytest.raises(FormatError) as columns_error:
        columnar.lines(0, good + damaged)
    assert str(columns_error.value) == str(rows_error.value)


def test_what_stays_on_the_row_path() -> None:
    maps = S.StructType((field("m", S.MapType(S.STRING, S.LONG)),))
    big = S.StructType((field("x", S.DecimalType(30, 2)),))
    assert columnar_for(_decoder(KEY, maps)) is None  # maps: dicts keyed by str(key)
    assert columnar_for(_decoder(KEY, big)) is None  # no columnar decoder for the type
    assert columnar_for(RowDecoder(None, "hdfs")) is None  # --raw: hex


FLAT: list[S.DataType] = [
    S.BOOLEAN,
    S.BYTE,
    S.SHORT,
    S.INTEGER,
    S.LONG,
    S.FLOAT,
    S.DOUBLE,
    S.STRING,
    S.BINARY,
]
FLAT += [S.DATE, S.TIMESTAMP, S.TIMESTAMP_NTZ, S.NULL, S.DecimalType(9, 2)]
flat_types: st.SearchStrategy[S.DataType] = st.sampled_from(FLAT)
plain_schemas = st.lists(flat_types, min_size=1, max_size=5).map(
    lambda ts: S.StructType(tuple(field(f"c{i}", t) for i, t in enumerate(ts)))
)
value_schemas = st.one_of(
    plain_schemas,
    st.lists(
        st.one_of(flat_types, st.builds(S.ArrayType, flat_types), plain_schemas), max_size=4
    ).map(lambda ts: S.StructType(tuple(field(f"v{i}", t) for i, t in enumerate(ts)))),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_schemas, value_schemas, st.data())
def test_random_schemas_give_the_row_paths_bytes(
    key: S.StructType, value: S.StructType, data: st.DataObject
) -> None:
    decoder = _decoder(key, value)
    columnar = columnar_for(decoder)
    assert columnar is not None
    rows = data.draw(st.lists(st.tuples(values_for(key), values_for(value)), max_size=8))
    pairs = _pairs(key, value, rows)
    assert columnar.lines(1, pairs) == _row_lines(decoder, 1, pairs)
    try:
        expected = _row_table(columnar, 1, pairs)
    except pa.ArrowInvalid:
        return  # a non-finite float: a string in the row path's rows, a double in the table
    assert columnar.table(1, pairs).equals(expected)


# Reads of a whole plain store by batch: a join side, a state variable or the timers are
# replayed row by row (state/families.py), so those reads are the row path's tests.
_ROW_BY_ROW_OPTIONS = ("readChangeFeed", "joinSide", "stateVarName", "readRegisteredTimers")
BY_BATCH = [
    p
    for p in READS
    if not any(
        str(p.values[1]["reader_options"].get(o, "")).lower() not in ("", "false", "none")  # type: ignore[index]
        for o in _ROW_BY_ROW_OPTIONS
    )
]


@pytest.mark.parametrize(("case", "read"), BY_BATCH)
def test_columns_equal_spark_statestore(case: Case, read: dict[str, Any]) -> None:
    """The columnar path's JSON lines and Arrow rows are the rows Spark's reader read."""
    ckpt = Checkpoint.open(str(case.checkpoint))
    op_id = read["operator_id"]
    store = read.get("store_name") or DEFAULT_STORE
    only = read["reader_options"].get("snapshotPartitionId")
    stores = ckpt.operators[op_id].stores
    # A join family of state format 3/4 (Spark's storeName) lives in the one default store.
    listed = stores[store] if store in stores else stores[DEFAULT_STORE]
    partitions = [p for p in listed.partitions if only is None or int(only) == p]
    rows = read_state(
        ckpt, batch=read["batch_id"], operator=op_id, store=store, partitions=partitions
    )
    if rows.state_var is not None or columnar_for(rows.decoder) is None:
        pytest.skip("replayed row by row")
    spark = _spark_rows(case, read)
    lines = b"".join(t for plan in rows.plans for t, _ in line_chunks(ckpt, plan, rows.decoder))
    assert _canon([json.loads(line) for line in lines.splitlines()]) == _canon(spark)
    assert _canon(rows.to_arrow().to_pylist()) == _canon(spark)


def _synthetic_deltas(root: Path, *, snapshot: bool) -> None:
    """A partition of repeated keys, removes and re-puts over four deltas (and with
    ``snapshot`` a snapshot of version 2 as the base)."""
    import random
    import sys

    from ckpt_cli.formats.compression import compress

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from synthetic import build, key_row, value_row

    build(
        root, partitions=1, versions=4, keys=300, snapshot_every=2 if snapshot else 100, crc=False
    )
    rng = random.Random(11)
    pack = struct.Struct(">i").pack
    for version in range(3 if snapshot else 1, 5):
        out = bytearray()
        for _ in range(400 if version == 1 else 60):
            k = key_row(rng.randrange(330))
            if rng.random() < 0.2:
                out += pack(len(k)) + k + pack(-1)  # a remove
            else:
                v = value_row(version, rng.randrange(10_000))
                out += pack(len(k)) + k + pack(len(v)) + v
        out += pack(-1)
        (root / f"state/0/0/{version}.delta").write_bytes(compress(bytes(out), "lz4"))


@pytest.mark.parametrize("snapshot", [False, True], ids=["deltas", "snapshot"])
def test_bulk_merge_equals_the_streamed_merge(tmp_path: Path, snapshot: bool) -> None:
    from ckpt_cli.core.rebuild import plan_version
    from ckpt_cli.state.bulk import packed_batches

    root = tmp_path / "ckpt"
    _synthetic_deltas(root, snapshot=snapshot)
    ckpt = Checkpoint.open(str(root))
    plan = plan_version(ckpt, 0, 0, 4)
    assert (plan.base is not None) == snapshot
    streamed = list(iter_state(ckpt, plan))
    bulk = [pair for batch in packed_batches(ckpt, plan, size=50) for pair in batch.pairs()]
    assert len(bulk) == len({k for k, _ in bulk})
    assert dict(bulk) == dict(streamed) and bulk
    if snapshot:  # the snapshot's order, then keys new in the deltas: iter_state's order
        assert [k for k, _ in bulk] == [k for k, _ in streamed]
    limited = [p for b in packed_batches(ckpt, plan, limit=7, size=5) for p in b.pairs()]
    assert limited == bulk[:7]


def test_a_truncated_delta_fails_as_the_streamed_merge_does(tmp_path: Path) -> None:
    from ckpt_cli.formats.compression import compress, decompressed_chunks

    root = tmp_path / "ckpt"
    _synthetic_deltas(root, snapshot=False)
    delta = root / "state/0/0/3.delta"
    with open(delta, "rb") as fh:
        data = b"".join(decompressed_chunks(str(delta), fh, codec="lz4"))
    delta.write_bytes(compress(data[:-9], "lz4"))  # no end marker, a record cut short
    rows = read_state(str(root))
    with pytest.raises(FormatError, match="truncated") as streamed:
        list(rows)
    with pytest.raises(FormatError) as columns:
        rows.to_arrow()
    assert str(columns.value) == str(streamed.value)


def test_colliding_key_hashes_fall_back_to_the_streamed_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckpt_cli.core import kernel
    from ckpt_cli.core.rebuild import plan_version
    from ckpt_cli.state import bulk

    monkeypatch.setattr(kernel, "ENABLED", False)  # the numpy merge's hashes
    root = tmp_path / "ckpt"
    _synthetic_deltas(root, snapshot=False)
    ckpt = Checkpoint.open(str(root))
    plan = plan_version(ckpt, 0, 0, 4)
    assert bulk._merged(ckpt, plan) is not None
    monkeypatch.setattr(bulk, "_FNV_PRIME", 0)  # every key hashes alike
    assert bulk._merged(ckpt, plan) is None
    streamed = list(iter_state(ckpt, plan))
    assert [p for b in bulk.packed_batches(ckpt, plan) for p in b.pairs()] == streamed


@pytest.mark.parametrize("spread_days", [3, 40_000, 3_000_000])
def test_timestamp_and_date_text_equals_the_row_paths(spread_days: int) -> None:
    """Days formatted once each (a batch over fewer days than rows) or one by one: both give
    ``rows.format_timestamp``'s text, years 1 to 9999 and before 1970 included."""
    import datetime as dt

    import numpy as np

    from ckpt_cli.state.decoders import format_timestamp
    from ckpt_cli.state.plain_arrow import _format_dates, _format_timestamps

    rng = np.random.default_rng(spread_days)
    first = max(-719162, -spread_days // 2)
    days = rng.integers(first, min(first + spread_days, 2932896), 5000)
    days[:2] = (first, min(first + spread_days, 2932896) - 1)
    micros = days * 86_400_000_000 + rng.integers(0, 86_400_000_000, len(days))
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    expected = [format_timestamp(epoch + dt.timedelta(microseconds=int(m))) for m in micros]
    got = _format_timestamps(micros, "Z")
    assert [bytes(row).decode() for row in got] == expected
    dates = [(dt.date(1970, 1, 1) + dt.timedelta(days=int(d))).isoformat() for d in days]
    assert [bytes(row).decode() for row in _format_dates(days)] == [d.rjust(10, "0") for d in dates]


def test_gathered_batches_give_each_partitions_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small batches of consecutive partitions decoded as one (``gathered_table_work``) give
    the tables of each decoded alone: batches sliced from a larger buffer, empty ones, and
    a gathered batch the columns cannot vouch for (the row path, record by record, each
    with its own partition)."""
    from ckpt_cli.state import columns
    from ckpt_cli.state.bulk import Packed, sliced

    columnar = columnar_for(_decoder(KEY, VALUE))
    assert columnar is not None
    rows = _tricky_rows()
    whole = Packed.of(_pairs(KEY, VALUE, rows * 3))
    middle = list(sliced(whole, 4))[1]  # records 4-7 of a larger buffer
    batches = [
        (3, Packed.of(_pairs(KEY, VALUE, rows[:2]))),
        (4, middle),
        (5, Packed.of([])),
        (9, Packed.of(_pairs(KEY, VALUE, rows[1:]))),
    ]
    alone = pa.concat_tables([columnar.table(pid, batch) for pid, batch in batches])
    assert alone.num_rows == 2 + 4 + len(rows) - 1
    assert columns._gathered_table(columnar, batches).equals(alone)

    def row_path(*_: object) -> None:
        raise RowPath

    monkeypatch.setattr(Columnar, "native", row_path)
    assert columns._gathered_table(columnar, batches).equals(alone)
