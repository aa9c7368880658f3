"""PySpark tier: ``ckpt repartition --engine spark`` (partitions read and written as Spark
tasks) gives what the local engine gives: the same rows per new partition, the same log
bytes, a clean validation, and an undo back to every byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import SparkEngine
from ckpt_cli.repartition.run import run_repartition, undo_repartition
from ckpt_cli.storage import Storage
from tests.conftest import run_cli
from tests.kill_support import tree
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_repartition_tasks import assert_same_result, copy, rows_by_partition

pytestmark = pytest.mark.slow


def test_hdfs_store_on_spark_equals_local(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    name = "spark4-hdfs-agg"
    before = tree(copy(name, tmp_path / "pristine"))
    local = copy(name, tmp_path / "local" / "ckpt")
    other = copy(name, tmp_path / "other" / "ckpt")
    a = run_repartition(Storage.from_url(str(local)), Guards(apply=True), partitions=3)
    b = run_repartition(
        Storage.from_url(str(other)), Guards(apply=True), partitions=3, engine=SparkEngine(spark)
    )
    assert_same_result(local, other, a, b)
    assert not list((tmp_path / "other").glob("*.ckpt-quarantine/*/staging"))
    undo_repartition(Storage.from_url(str(other)))
    assert tree(other) == before


def test_rocksdb_store_on_spark_cli_equals_local(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    name = "spark4-rocksdb-agg"
    before = tree(copy(name, tmp_path / "pristine"))
    local = copy(name, tmp_path / "local" / "ckpt")
    other = copy(name, tmp_path / "other" / "ckpt")
    args = ("--partitions", "3", "--apply", "-y", "--json")
    a = run_cli("repartition", str(local), *args)
    b = run_cli("repartition", str(other), *args, "--engine", "spark")
    assert a.exit_code == 0 and b.exit_code == 0, b.stderr
    doc_a, doc_b = a.json(), b.json()
    for doc in (doc_a, doc_b):
        doc.pop("checkpoint")
        doc["result"].pop("manifest")
        doc["result"].pop("validation")
        doc["result"].pop("written")  # SST names and zip sizes vary run to run
    assert doc_b == doc_a
    assert rows_by_partition(other) == rows_by_partition(local)
    last = Checkpoint.open(str(local)).batches.latest_committed
    for rel in (f"offsets/{last}", f"commits/{last}", "state/0/_metadata/metadata"):
        assert (other / rel).read_bytes() == (local / rel).read_bytes(), rel
    assert run_cli("validate", str(other)).exit_code == 0
    assert not list((tmp_path / "other").glob("*.ckpt-quarantine/*/staging"))
    assert run_cli("repartition", str(other), "--undo").exit_code == 0
    assert tree(other) == before
