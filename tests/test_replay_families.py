"""``--where``, ``--raw`` and dataset output on one family of a store of several (a
transformWithState variable or its timers, a format 3/4 join's family or side), checked
against the reads Spark saved beside the fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from tests.conftest import CASES, Case, run_cli
from tests.test_state_vs_spark import (
    _canon,
    _join_format_4_side,
    _spark_rows,
    _without_event_time,
    read_like_spark,
)

# One saved read per kind of family: value, list, map (both shapes), timers, change feed,
# a join family, a join side (format 3 and 4), in UnsafeRow and Avro encodings.
PICKS = {
    "spark4-tws-row": [
        "op0_default_batch11_total.jsonl",
        "op0_default_batch11_events.jsonl",
        "op0_default_batch11_buckets.jsonl",
        "op0_default_batch11_buckets_nested.jsonl",
        "op0_default_batch11_timers.jsonl",
        "op0_default_changefeed_8_to_11_events.jsonl",
    ],
    "spark4-tws-avro": ["op0_default_batch5_last.jsonl", "op0_default_batch5_seen_nested.jsonl"],
    # Issue 29: values of two schema ids; a variable dropped at a later restart; a list
    # replaced with put across the restart that added it.
    "spark4-tws-evolve-avro": [
        "op0_default_batch5_seen.jsonl",
        "op0_default_changefeed_0_to_5_cnt.jsonl",
    ],
    "spark4-tws-vars": [
        "op0_default_batch3_by_bucket.jsonl",
        "op0_default_changefeed_0_to_11_hist.jsonl",
    ],
    "spark4-join-v3-rocksdb": [
        "op0_left-keyWithIndexToValue_batch11.jsonl",
        "op0_right_batch11.jsonl",
    ],
    "spark4-join-v4-rocksdb": [
        "op0_left-keyWithTsToValues_changefeed_8_to_11.jsonl",
        "op0_left_batch11.jsonl",
    ],
}
BY_NAME = {c.name: c for c in CASES}
PICKED: list[tuple[Case, dict[str, Any]]] = [
    (BY_NAME[name], read)
    for name, files in PICKS.items()
    for rows_file in files
    for read in BY_NAME[name].expected["state_reads"]
    if read.get("rows_file", "").rsplit("/", 1)[-1] == rows_file
]
READS = [pytest.param(c, r, id=f"{c.name}-{r['rows_file'].rsplit('/', 1)[-1]}") for c, r in PICKED]


def test_every_pick_is_a_saved_read() -> None:
    assert len(READS) == sum(len(files) for files in PICKS.values())


def _key_column(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The first key column and a value it has in some but not all rows."""
    column = next(iter(rows[0]["key"]))
    values = sorted({r["key"][column] for r in rows})
    assert len(values) > 1
    return column, values[-1]


@pytest.mark.parametrize(("case", "read"), READS)
def test_where_keeps_the_rows_spark_has_for_that_key(case: Case, read: dict[str, Any]) -> None:
    spark = _spark_rows(case, read)
    column, value = _key_column(spark)
    ours = read_like_spark(Checkpoint.open(str(case.checkpoint)), read, where={column: value})
    want = [r for r in spark if r["key"][column] == value]
    assert 0 < len(want) < len(spark)
    if _join_format_4_side(case, read):  # Spark's __event_time is wrong (test_state_vs_spark)
        ours, want = _without_event_time(ours), _without_event_time(want)
    assert _canon(ours) == _canon(want)


@pytest.mark.parametrize(("case", "read"), READS)
def test_raw_gives_each_stored_record_undecoded(case: Case, read: dict[str, Any]) -> None:
    ckpt = Checkpoint.open(str(case.checkpoint))
    raw = read_like_spark(ckpt, read, raw=True)
    decoded = read_like_spark(ckpt, read)
    assert raw and all(
        isinstance(r["key"], str) and isinstance(r["value"], (str, type(None))) for r in raw
    )
    for row in raw:
        bytes.fromhex(row["key"])
    changes = "readChangeFeed" in read["reader_options"]
    # A record per stored key (per change in the change feed): a list or map variable, or a
    # format 4 family, holds several decoded rows per record.
    assert len(raw) <= len(decoded)
    if not changes:
        keys = {(r["partition_id"], r["key"]) for r in raw}
        assert len(keys) == len(raw)


def test_where_on_raw_rows_is_refused() -> None:
    case = BY_NAME["spark4-tws-row"]
    with pytest.raises(CkptError, match="not with raw"):
        read_like_spark(
            Checkpoint.open(str(case.checkpoint)),
            PICKED[0][1],
            raw=True,
            where={"k": "k0"},
        )


def test_where_names_the_variable_key_columns() -> None:
    result = run_cli(
        "replay", str(BY_NAME["spark4-tws-row"].checkpoint), "--state-var", "events",
        "--where", "nope=1",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "the key has no column 'nope' (columns: k)" in result.stderr


def _dataset_rows(root: Path, fmt: str) -> list[dict[str, Any]]:
    rows = []
    for part in sorted(root.glob("partition_id=*")):
        pid = int(part.name.split("=")[1])
        for f in part.iterdir():
            if fmt == "parquet":
                import pyarrow.parquet as pq

                got = pq.read_table(f).to_pylist()
            else:
                got = [json.loads(line) for line in f.read_text().splitlines() if line]
            rows += [{**r, "partition_id": pid} for r in got]
    return rows


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize(
    ("name", "rows_file", "args"),
    [
        ("spark4-tws-row", "op0_default_batch11_events.jsonl", ["--state-var", "events"]),
        ("spark4-tws-row-avro", "op0_default_batch11_timers.jsonl", ["--timers"]),
        ("spark4-tws-evolve-avro", "op0_default_batch5_cnt.jsonl", ["--state-var", "cnt"]),
        ("spark4-tws-vars", "op0_default_batch3_by_bucket.jsonl", ["--state-var", "by_bucket"]),
        ("spark4-join-v3-rocksdb", "op0_right_batch11.jsonl", ["--join-side", "right"]),
        (
            "spark4-join-v4-rocksdb",
            "op0_right-tsWithKey_batch11.jsonl",
            ["--store", "right-tsWithKey"],
        ),
    ],
)
def test_dataset_of_a_family_equals_spark(
    name: str, rows_file: str, args: list[str], fmt: str, tmp_path: Path
) -> None:
    case = BY_NAME[name]
    read = next(
        r for r in case.expected["state_reads"] if r.get("rows_file", "").endswith(rows_file)
    )
    out = tmp_path / "out"
    result = run_cli(
        "replay", str(case.checkpoint), "--batch", str(read["batch_id"]), *args,
        "-f", fmt, "-O", f"{out}/", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    spark = _spark_rows(case, read)
    assert result.json()["rows"] == len(spark)
    assert _canon(_dataset_rows(out, fmt)) == _canon(spark)
