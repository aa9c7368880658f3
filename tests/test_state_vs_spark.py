"""Rebuilding state from a fixture's files gives the rows Spark's ``statestore`` source read.

For every successful read recorded in a fixture's expected.json (by batch, by snapshot
partition, or as a change feed), the library's ``read_state`` reads the same store's files
(snapshot + deltas, zip + changelogs, or the format-v2 lineage) and decodes them with the
store's schema file.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ckpt_cli.model import DEFAULT_STORE, Checkpoint
from ckpt_cli.replay import read_state
from tests.conftest import CASES, Case

READS = [
    pytest.param(case, read, id=f"{case.name}-{read['rows_file'].rsplit('/', 1)[-1]}")
    for case in CASES
    for read in case.expected.get("state_reads", [])
    if "error" not in read and not read.get("join_side")
]


def _canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def _spark_rows(case: Case, read: dict[str, Any]) -> list[dict[str, Any]]:
    path = case.root / "state" / read["rows_file"].rsplit("/", 1)[-1]
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.mark.parametrize(("case", "read"), READS)
def test_rows_equal_spark_statestore(case: Case, read: dict[str, Any]) -> None:
    ckpt = Checkpoint.open(str(case.checkpoint))
    op_id = read["operator_id"]
    store = read.get("store_name") or DEFAULT_STORE
    options = read["reader_options"]
    only = options.get("snapshotPartitionId")
    partitions = [
        p for p in ckpt.operators[op_id].stores[store].partitions if only is None or int(only) == p
    ]
    if options.get("readChangeFeed") == "true":
        rows = read_state(
            ckpt,
            change_start_batch=int(options["changeStartBatchId"]),
            change_end_batch=int(options["changeEndBatchId"]),
            operator=op_id,
            store=store,
            partitions=partitions,
        )
    else:
        rows = read_state(
            ckpt, batch=read["batch_id"], operator=op_id, store=store, partitions=partitions
        )
    ours = list(rows)
    spark = _spark_rows(case, read)
    assert len(ours) == read["num_rows"] == len(spark)
    assert _canon(ours) == _canon(spark)
