"""A local PySpark session for the oracle tier (tests marked ``slow``)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pyspark_sql = pytest.importorskip("pyspark.sql")
    # Python workers run this interpreter (the venv with ckpt_cli), not the system one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("ckpt-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "200ms")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def write_batch(input_dir: Path, index: int, rows: list[dict[str, Any]]) -> None:
    """Write one input file atomically (the file source must never see half a file)."""
    input_dir.mkdir(parents=True, exist_ok=True)
    tmp = input_dir / f".part-{index:05d}.json.tmp"
    tmp.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tmp.rename(input_dir / f"part-{index:05d}.json")


def run_batches(query: Any, input_dir: Path, batches: list[list[dict[str, Any]]]) -> list[int]:
    """Feed one file per batch and wait for each; return the batch ids Spark reported."""
    seen: set[int] = set()
    for index, rows in enumerate(batches):
        write_batch(input_dir, index, rows)
        query.processAllAvailable()
        time.sleep(0.3)  # let state store maintenance write snapshots / delete old files
        for progress in query.recentProgress:
            seen.add(int(progress["batchId"]))
    return sorted(seen)
