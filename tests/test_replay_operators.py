"""Joins, session windows, applyInPandasWithState and dropDuplicatesWithinWatermark written
by Spark 4.3 (``fixtures/pending/``, and ``spark4-join``): every read Spark saved for them,
by batch, by change feed, by ``storeName`` or by ``joinSide``, equals ckpt's ``read_state``
as a multiset of rows."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from ckpt_cli.errors import CkptError
from ckpt_cli.model import DEFAULT_STORE, Checkpoint
from ckpt_cli.replay import read_state
from tests.conftest import REPO, Case, run_cli
from tests.test_state_vs_spark import _canon, _spark_rows

# The cases ckpt reads in full; the others of issue #16's operators follow below.
READ_CASES = [
    "spark4-join-v2-rocksdb",
    "spark4-join-v3-rocksdb",
    "spark4-join-v4-rocksdb",
    "spark4-session-hdfs",
    "spark4-session-rocksdb",
    "spark4-fmgws-hdfs",
    "spark4-fmgws-v1-hdfs",
    "spark4-fmgws-rocksdb",
    "spark4-dedup-ww-hdfs",
    "spark4-dedup-ww-hdfs-checksum",
    "spark4-dedup-ww-rocksdb",
    "spark4-multi-op-rocksdb",
]


def _case(name: str) -> Case:
    pending = REPO / "fixtures" / "pending" / name
    return Case(name, pending if pending.is_dir() else REPO / "fixtures" / "checkpoints" / name)


CASES = [_case(name) for name in [*READ_CASES, "spark4-join"]]
READS = [
    pytest.param(case, read, id=f"{case.name}-{read['rows_file'].rsplit('/', 1)[-1]}")
    for case in CASES
    for read in case.expected.get("state_reads", [])
    if "error" not in read
    and "rows_file" in read
    # Spark 4.3's joinSide rows of format 4 are wrong (test_join_state_format_4_join_side...)
    and not (case.name == "spark4-join-v4-rocksdb" and read.get("join_side"))
]


def _read(case: Case, read: dict[str, Any]) -> list[dict[str, Any]]:
    ckpt = Checkpoint.open(str(case.checkpoint))
    options = read["reader_options"]
    where: dict[str, Any] = {"operator": read["operator_id"]}
    if read.get("join_side"):
        where["join_side"] = read["join_side"]
    else:
        where["store"] = read.get("store_name") or DEFAULT_STORE
    if "snapshotPartitionId" in options:
        where["partitions"] = [int(options["snapshotPartitionId"])]
    if options.get("readChangeFeed") == "true":
        return list(
            read_state(
                ckpt,
                change_start_batch=int(options["changeStartBatchId"]),
                change_end_batch=int(options["changeEndBatchId"]),
                **where,
            )
        )
    return list(read_state(ckpt, batch=read["batch_id"], **where))


def test_every_case_has_reads() -> None:
    for case in CASES:
        assert any(p.values[0] is case for p in READS), case.name


@pytest.mark.parametrize(("case", "read"), READS)
def test_rows_equal_spark(case: Case, read: dict[str, Any]) -> None:
    ours = _read(case, read)
    spark = _spark_rows(case, read)
    assert len(ours) == read["num_rows"] == len(spark)
    assert _canon(ours) == _canon(spark)


def test_join_side_change_feed_is_refused() -> None:
    ckpt = Checkpoint.open(str(_case("spark4-join").checkpoint))
    with pytest.raises(CkptError, match="change feed"):
        read_state(ckpt, operator=0, join_side="left", change_start_batch=17)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [({"join_side": "up"}, "left or right"), ({"join_side": "left", "store": "x"}, "not both")],
)
def test_join_side_bad_selection(kwargs: dict[str, Any], problem: str) -> None:
    ckpt = Checkpoint.open(str(_case("spark4-join").checkpoint))
    with pytest.raises(CkptError, match=problem):
        read_state(ckpt, operator=0, **kwargs)


def test_cli_join_side() -> None:
    case = _case("spark4-join")
    read = next(r for r in case.expected["state_reads"] if r.get("join_side") == "right")
    result = run_cli(
        "replay", str(case.checkpoint), "--batch", str(read["batch_id"]), "--join-side", "right",
        "--format", "jsonl",
    )  # fmt: skip
    assert result.exit_code == 0
    ours = [json.loads(line) for line in result.stdout.splitlines() if line]
    assert _canon(ours) == _canon(_spark_rows(case, read))
    bad = run_cli("replay", str(case.checkpoint), "--join-side", "left", "--store", "x")
    assert bad.exit_code == 2
    assert "--join-side or --store" in bad.stderr


def test_cli_join_format_3_store_and_refusal() -> None:
    """``--store`` names a family of a format 3 join; without one: exit 2 listing them."""
    case = _case("spark4-join-v3-rocksdb")
    read = next(r for r in case.expected["state_reads"] if r.get("store_name") and "rows_file" in r)
    result = run_cli(
        "replay", str(case.checkpoint), "--batch", str(read["batch_id"]),
        "--store", read["store_name"], "--format", "jsonl",
    )  # fmt: skip
    assert result.exit_code == 0
    ours = [json.loads(line) for line in result.stdout.splitlines() if line]
    assert _canon(ours) == _canon(_spark_rows(case, read))
    bad = run_cli("replay", str(case.checkpoint))
    assert bad.exit_code == 2
    assert "name one with --store (left-keyToNumValues, " in bad.stderr


def test_hdfs_row_checksum_mismatch_names_file_and_key() -> None:
    """A value whose CRC32C does not match its key and value rows is an error naming the
    file and the key, not a row."""
    from ckpt_cli.formats import compression, records
    from ckpt_cli.replay.read import _verified

    case = _case("spark4-dedup-ww-hdfs-checksum")
    path = case.checkpoint / "state/0/0/12.snapshot"
    chunks = compression.decompressed_chunks(str(path), io.BytesIO(path.read_bytes()))
    kv = [(k, v) for k, v in records.iter_kv_records(str(path), chunks, snapshot=True)]
    assert len(list(_verified("12.snapshot", iter(kv)))) == len(kv)  # the real bytes verify
    key, value = next((k, v) for k, v in kv if v is not None)
    broken = [(key, bytes([value[0] ^ 1]) + value[1:])]
    with pytest.raises(CkptError, match=f"12.snapshot: row checksum mismatch for key {key.hex()}"):
        list(_verified("12.snapshot", iter(broken)))


@pytest.mark.parametrize("name", ["spark4-join-v3-rocksdb", "spark4-join-v4-rocksdb"])
@pytest.mark.parametrize(
    ("choice", "problem"),
    [
        ({}, r"keeps its stores as column families of one store: name one with "),
        ({"store": "nope"}, r"no column family 'nope'; the join has: left-"),
    ],
)
def test_join_state_format_3_and_4_need_a_family(
    name: str, choice: dict[str, Any], problem: str
) -> None:
    """As Spark refuses the default store: the error names the operator and its families."""
    with pytest.raises(CkptError, match=r"^state/0: .*" + problem):
        read_state(str(_case(name).checkpoint), operator=0, **choice)


def test_join_state_format_4_join_side_refused() -> None:
    """Spark 4.3 decodes format 4's joinSide event times from the wrong bytes (its rows show
    the join key's characters as a number): not imitated, one clear error instead."""
    case = _case("spark4-join-v4-rocksdb")
    with pytest.raises(CkptError, match=r"^state/0: join_side of stream-stream join state "):
        read_state(str(case.checkpoint), operator=0, join_side="left")
