"""PySpark tier: ``ckpt convert --engine spark`` (store partitions read and written as Spark
tasks) converts what the local engine converts: the same records, a clean validation, no
staging left, Spark's own reader agreeing, and an undo back to every byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.convert.run import run_convert, undo_convert
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import SparkEngine
from tests.conftest import fixture_case, run_cli
from tests.fixture_copies import latest
from tests.kill_support import tree
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_convert import _kwargs, copy, records_at
from tests.test_convert_spark import saved_reads, saved_rows, spark_rows

pytestmark = pytest.mark.slow

FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("spark4-hdfs-agg", ["--provider", "rocksdb"]),
        ("spark4-rocksdb-changelog", ["--format-version", "2"]),
        ("spark4-session-rocksdb", ["--provider", "hdfs"]),
    ],
)
def test_spark_tasks_convert_what_one_machine_converts(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    change: list[str],
    tmp_path: Path,
) -> None:
    here = copy(name, tmp_path / "here" / "ckpt")
    there = copy(name, tmp_path / "there" / "ckpt")
    original = tree(there)
    last = latest(here)
    a = run_convert(Checkpoint.open(str(here)).storage, Guards(apply=True), **_kwargs(change))
    b = run_convert(
        Checkpoint.open(str(there)).storage,
        Guards(apply=True),
        engine=SparkEngine(spark),
        **_kwargs(change),
    )
    assert a.result is not None and b.result is not None and b.result.validation.ok
    assert records_at(there, last + 1) == records_at(here, last + 1)
    assert not list((tmp_path / "there").glob("*.ckpt-quarantine/*/staging"))
    case = fixture_case(name)
    reads = [
        r for r in saved_reads(case, last) if "snapshotStartBatchId" not in r["reader_options"]
    ]
    assert reads, f"{name}: no saved read of batch {last}"
    # Spark 4.1+ reads format v2 by batchId only with the session set to it.
    spark.conf.set(FORMAT_VERSION, str(b.plan.format_version))
    try:
        for read in reads:
            options = {**read["reader_options"], "batchId": str(last + 1)}
            assert spark_rows(spark, there, options) == saved_rows(case, read)
    finally:
        spark.conf.unset(FORMAT_VERSION)
    undo_convert(Checkpoint.open(str(there)).storage)
    assert tree(there) == original


def test_the_cli_runs_a_conversion_on_spark(tmp_path: Path) -> None:
    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    done = run_cli(
        "convert", str(root), "--provider", "rocksdb", "--engine", "spark", "--apply", "--yes"
    )
    assert done.exit_code == 0, done.stdout + done.stderr
    assert run_cli("validate", str(root)).exit_code == 0
