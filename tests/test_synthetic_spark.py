"""PySpark tier: Spark's own statestore source reads the synthetic checkpoints the benchmarks
build with the project's writers, and returns what ckpt replay returns."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, run_cli
from tests.spark_support import spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.slow

sys.path.insert(0, str(REPO / "benchmarks"))
from synthetic import build  # noqa: E402


@pytest.mark.parametrize("batch", [9, 11])
def test_spark_reads_a_synthetic_checkpoint(spark: Any, tmp_path: Path, batch: int) -> None:  # noqa: F811
    root = tmp_path / "ckpt"
    build(root, partitions=3, versions=12, keys=500, updates=7, snapshot_every=5)
    rows = spark.read.format("statestore").option("batchId", batch).load(str(root)).collect()
    theirs = sorted(
        json.dumps(
            {
                "partition_id": r["partition_id"],
                "key": r["key"].asDict(),
                "value": {
                    "count": r["value"]["count"],
                    "sum": r["value"]["sum"],
                    "max": r["value"]["max"].strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z",
                },
            },
            sort_keys=True,
        )
        for r in rows
    )
    result = run_cli("replay", str(root), "--batch", str(batch), "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    ours = sorted(
        json.dumps(json.loads(line), sort_keys=True) for line in result.stdout.splitlines()
    )
    assert len(theirs) == 500
    assert ours == theirs
