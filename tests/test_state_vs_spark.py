"""Rebuilding state from a fixture's files gives the rows Spark's ``statestore`` source read.

For every successful read recorded in a fixture's expected.json (by batch, by snapshot
partition, or as a change feed; by ``storeName``, ``joinSide``, ``stateVarName``, with
``readRegisteredTimers`` or ``flattenCollectionTypes=false``), the library's ``read_state``
reads the same store's files (snapshot + deltas, zip + changelogs, or the format-v2 lineage)
and decodes them with the store's schema file, and gives the same rows as a multiset.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ckpt_cli.core.model import DEFAULT_STORE, Checkpoint
from ckpt_cli.replay import read_state
from tests.conftest import CASES, Case

# Every successful read Spark saved: (case, read).
SAVED_READS: list[tuple[Case, dict[str, Any]]] = [
    (case, read)
    for case in CASES
    for read in case.expected.get("state_reads", [])
    if "error" not in read and "rows_file" in read
]
READS = [
    pytest.param(case, read, id=f"{case.name}-{read['rows_file'].rsplit('/', 1)[-1]}")
    for case, read in SAVED_READS
]


def _canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def _spark_rows(case: Case, read: dict[str, Any]) -> list[dict[str, Any]]:
    path = case.root / "state" / read["rows_file"].rsplit("/", 1)[-1]
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def read_like_spark(ckpt: Checkpoint, read: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    """``read_state`` with the arguments that name each of the read's Spark options (and
    ``extra`` ones)."""
    options = read["reader_options"]
    op_id = read["operator_id"]
    where: dict[str, Any] = {
        "operator": op_id,
        "state_var": options.get("stateVarName"),
        "timers": options.get("readRegisteredTimers") == "true",
        "flatten": options.get("flattenCollectionTypes") != "false",
        **extra,
    }
    if read.get("join_side"):
        where["join_side"] = read["join_side"]
    else:
        where["store"] = read.get("store_name") or DEFAULT_STORE
    if "snapshotPartitionId" in options:
        where["partitions"] = [int(options["snapshotPartitionId"])]
    if options.get("readChangeFeed") == "true":
        rows = read_state(
            ckpt,
            change_start_batch=int(options["changeStartBatchId"]),
            change_end_batch=int(options["changeEndBatchId"]),
            **where,
        )
    else:
        rows = read_state(ckpt, batch=read["batch_id"], **where)
    return list(rows)


def _join_format_4_side(case: Case, read: dict[str, Any]) -> bool:
    """A joinSide read of join state format 4: Spark 4.3 reads the key's ``__event_time``
    from the wrong bytes, ckpt gives the stored one (test_replay_operators checks both)."""
    conf = case.expected["confs"].get("spark.sql.streaming.join.stateFormatVersion")
    return bool(read.get("join_side")) and conf == "4"


def _without_event_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "key": {k: v for k, v in r["key"].items() if k != "__event_time"}} for r in rows]


@pytest.mark.parametrize(("case", "read"), READS)
def test_rows_equal_spark_statestore(case: Case, read: dict[str, Any]) -> None:
    ours = read_like_spark(Checkpoint.open(str(case.checkpoint)), read)
    spark = _spark_rows(case, read)
    if _join_format_4_side(case, read):
        ours, spark = _without_event_time(ours), _without_event_time(spark)
    assert len(ours) == read["num_rows"] == len(spark)
    assert _canon(ours) == _canon(spark)
