"""Spark 4.3 restarts on an unreadable ``state/<op>/_metadata/metadata`` (it catches the error
reading it and logs a warning), and validate's verdict matches: a warning, not an error."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, run_cli
from tests.fixture_queries import recorded_input, restart
from tests.spark_support import spark, write_batch  # noqa: F401 - the session fixture
from tests.test_validate_links import (
    OPERATOR_METADATA,
    damage_operator_metadata,
    emptied,
    garbage_json,
)

pytestmark = pytest.mark.slow

BY_NAME = {c.name: c for c in CASES}


@pytest.mark.parametrize("damage", [garbage_json, emptied])
def test_validate_agrees_with_spark_on_unreadable_operator_metadata(
    spark: Any,  # noqa: F811 - the session fixture
    damage: Callable[[Path], None],
    tmp_path: Path,
) -> None:
    case = BY_NAME["spark4-hdfs-agg"]
    root = tmp_path / "checkpoint"
    shutil.copytree(case.checkpoint, root)
    damage_operator_metadata(root, damage)
    damaged = (root / OPERATOR_METADATA).read_bytes()
    result = run_cli("validate", str(root), "--json")
    assert result.json()["ok"], result.stdout
    with recorded_input(case) as input_dir:
        emitted = restart(spark, case, input_dir, root)
    assert any(emitted.values())
    # Spark neither fails nor rewrites it.
    assert (root / OPERATOR_METADATA).read_bytes() == damaged


def count_processor() -> Any:
    """A transformWithState processor counting rows per key in a ValueState."""
    from pyspark.sql import Row
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class Count(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.count = handle.getValueState("c", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803
            n = (self.count.get()[0] if self.count.exists() else 0) + sum(1 for _ in rows)
            self.count.update((n,))
            yield Row(k=key[0], n=n)

        def close(self) -> None:
            pass

    return Count()


def run_transform_with_state(session: Any, root: Path, input_dir: Path) -> None:
    """One run of a transformWithState query over ``input_dir`` (RocksDB state, operator
    metadata v2: Spark writes ``_metadata/v2/<batch>`` on the first batch of each run)."""
    provider = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    session.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    try:
        query = (
            session.readStream.schema("k string")
            .json(str(input_dir))
            .groupBy("k")
            .transformWithState(
                statefulProcessor=count_processor(),
                outputStructType="k string, n long",
                outputMode="Update",
                timeMode="None",
            )
            .writeStream.foreachBatch(lambda batch, batch_id: batch.count())
            .outputMode("update")
            .option("checkpointLocation", str(root))
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    finally:
        session.conf.unset("spark.sql.streaming.stateStore.providerClass")


@pytest.mark.filterwarnings("ignore::FutureWarning")  # PySpark on pandas 3
@pytest.mark.parametrize("newest", [True, False], ids=["newest", "older"])
def test_validate_agrees_with_spark_on_unreadable_v2_operator_metadata(
    spark: Any,  # noqa: F811 - the session fixture
    newest: bool,
    tmp_path: Path,
) -> None:
    # transformWithState in Python needs pandas and protobuf (not in every environment).
    pytest.importorskip("pandas")
    pytest.importorskip("google.protobuf")
    root, input_dir = tmp_path / "checkpoint", tmp_path / "input"
    for run in range(2):  # writes _metadata/v2/0 and _metadata/v2/1
        write_batch(input_dir, run, [{"k": f"k{i % 3}"} for i in range(5)])
        run_transform_with_state(spark, root, input_dir)
    assert run_cli("validate", str(root), "--json").json()["ok"]
    damaged = root / f"state/0/_metadata/v2/{1 if newest else 0}"
    # Its own version line, then JSON Jackson refuses.
    damaged.write_bytes(damaged.read_bytes().split(b"\n", 1)[0] + b"\n{bad")
    (damaged.parent / f".{damaged.name}.crc").unlink()
    report = run_cli("validate", str(root), "--json").json()
    assert report["ok"] == (not newest), report["findings"]
    (finding,) = report["findings"]
    assert finding["code"] == "CORRUPT_FILE"
    assert finding["paths"] == [str(damaged.relative_to(root))]
    write_batch(input_dir, 2, [{"k": "k0"}])
    if newest:
        # Jackson's parse error, from OperatorStateMetadataV2Reader.read
        with pytest.raises(Exception, match="was expecting double-quote"):
            run_transform_with_state(spark, root, input_dir)
    else:
        run_transform_with_state(spark, root, input_dir)
