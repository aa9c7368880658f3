"""PySpark tier: ``ckpt state delete --engine spark`` (store partitions matched and written
as Spark tasks) deletes what the local engine deletes: the same plan, the same state after,
a clean validation, no staging left, Spark's own reader agreeing, and an undo back to every
byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.delete.run import run_delete, undo_delete
from ckpt_cli.engine import SparkEngine
from tests.conftest import fixture_case, run_cli
from tests.fixture_copies import latest
from tests.kill_support import tree
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_convert_spark import saved_reads, saved_rows, spark_rows
from tests.test_delete_tasks import copy, state

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("spark4-hdfs-agg", "key.k in ('k0', 'k5')"),
        ("spark4-rocksdb-agg", "key.k = 'k3'"),  # a new zip of the keys left
        ("spark4-rocksdb-v2", "key.k in ('k1', 'k2')"),
    ],
)
def test_spark_tasks_delete_what_one_machine_deletes(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    where: str,
    tmp_path: Path,
) -> None:
    here = copy(name, tmp_path / "here" / "ckpt")
    there = copy(name, tmp_path / "there" / "ckpt")
    original = tree(there)
    last = latest(here)
    a = run_delete(Checkpoint.open(str(here)).storage, Guards(apply=True), operator=0, where=where)
    b = run_delete(
        Checkpoint.open(str(there)).storage,
        Guards(apply=True),
        operator=0,
        where=where,
        engine=SparkEngine(spark),
    )
    assert a.result is not None and b.result is not None and b.result.validation.ok
    assert b.plan.body_json() | {"checkpoint": None} == a.plan.body_json() | {"checkpoint": None}
    assert state(there) == state(here)
    assert not list((tmp_path / "there").glob("*.ckpt-quarantine/*/staging"))
    case = fixture_case(name)
    assert len(b.plan.sample) == b.result.removed  # every removed row (a handful)
    gone = {json.dumps(r["key"], sort_keys=True) for r in b.plan.sample}
    for read in saved_reads(case, last):
        if read["reader_options"].get("operatorId", "0") != "0":
            continue
        want = [
            r
            for r in saved_rows(case, read)
            if json.dumps(json.loads(r)["key"], sort_keys=True) not in gone
        ]
        options = {**read["reader_options"], "batchId": str(last + 1)}
        assert spark_rows(spark, there, options, read.get("session_confs")) == want
    undo_delete(Checkpoint.open(str(there)).storage)
    assert tree(there) == original


def test_the_cli_runs_a_deletion_on_spark(tmp_path: Path) -> None:
    root = copy("spark4-tws-row", tmp_path / "ckpt")
    done = run_cli(
        "state", "delete", str(root), "--operator", "0", "-w", "key.k = 'k1'",
        "--engine", "spark", "--apply", "--yes", "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.stdout + done.stderr
    assert done.json()["result"]["removed"] == 1
    assert run_cli("validate", str(root)).exit_code == 0
