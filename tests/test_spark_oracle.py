"""The oracle tier: fresh checkpoints written by real PySpark queries (not the bundled ones),
checked against the file listing, the commit log and Spark's own state-metadata source."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.spark_support import run_batches, spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.slow

STATE_FILE = re.compile(r"^(\d+)(?:_([0-9a-f-]+))?\.(delta|snapshot|zip|changelog)$")
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

PROVIDERS = {
    "hdfs": {},
    "rocksdb-changelog": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    },
    "rocksdb-v2": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    },
}


def batches_of_rows(n: int) -> list[list[dict[str, Any]]]:
    # Deterministic: keys repeat across batches, ids repeat so dropDuplicates has work to do.
    return [
        [
            {"id": (b * 5 + i) % 17, "k": f"k{(b + i) % 4}", "v": b * 10 + i, "ts": 1700000000 + b}
            for i in range(6)
        ]
        for b in range(n)
    ]


def walk(root: Path) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(out)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_versions_agrees_with_files_commit_log_and_spark(
    spark: Any,  # noqa: F811
    provider: str,
    tmp_path: Path,
) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    ckpt = tmp_path / "checkpoint"
    input_dir = tmp_path / "input"
    input_dir.mkdir()
    confs = {
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.streaming.minBatchesToRetain": "3",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
        **PROVIDERS[provider],
    }
    previous = {key: spark.conf.get(key, None) for key in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        stream = (
            spark.readStream.schema("id INT, k STRING, v LONG, ts LONG")
            .option("maxFilesPerTrigger", 1)
            .json(str(input_dir))
        )
        # Two stateful operators: a deduplication feeding an aggregation.
        counts = stream.dropDuplicates(["id"]).groupBy("k").agg(F.count("*"), F.sum("v"))
        query = (
            counts.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(ckpt))
            .start()
        )
        try:
            batches_run = run_batches(query, input_dir, batches_of_rows(7))
            query_id = str(query.id)
        finally:
            query.stop()
        metadata_rows = [
            r.asDict() for r in spark.read.format("state-metadata").load(str(ckpt)).collect()
        ]
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)

    result = run_cli("versions", str(ckpt), "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()

    # 1. The file listing, walked independently of ckpt.
    files = walk(ckpt)
    assert report["files"]["count"] == len(files)
    expected_versions: dict[tuple[int, str, int], set[int]] = {}
    for rel in files:
        parts = rel.split("/")
        match = STATE_FILE.match(parts[-1])
        if parts[0] != "state" or not match or parts[2].startswith("_"):
            continue
        store = parts[3] if len(parts) == 5 else "default"
        loc = (int(parts[1]), store, int(parts[2]))
        expected_versions.setdefault(loc, set()).add(int(match.group(1)))
    got_versions = {
        (op["id"], store["name"], part["id"]): set(part["versions"])
        for op in report["operators"]
        for store in op["stores"]
        for part in store["partitions"]
    }
    assert got_versions == expected_versions

    # 2. The commit and offsets logs.
    commits = sorted(int(n) for n in os.listdir(ckpt / "commits") if n.isdigit())
    offsets = sorted(int(n) for n in os.listdir(ckpt / "offsets") if n.isdigit())
    assert report["batches"]["commits"] == commits
    assert report["batches"]["offsets"] == offsets
    assert report["batches"]["latest_committed"] == max(batches_run)
    assert set(commits) <= set(batches_run)
    assert report["query_id"] == query_id

    # 3. Spark's own state-metadata source: operators, stores and partition counts.
    spark_stores = {
        (r["operatorId"], r["stateStoreName"]): r["numPartitions"] for r in metadata_rows
    }
    ours = {
        (op["id"], store["name"]): len(store["partitions"])
        for op in report["operators"]
        for store in op["stores"]
    }
    assert ours == spark_stores
    assert report["settings"]["shuffle_partitions"] == 3
    assert {r["maxBatchId"] for r in metadata_rows} == {max(batches_run)}
    expected_provider = "hdfs" if provider == "hdfs" else "rocksdb"
    assert {s["provider"] for op in report["operators"] for s in op["stores"]} == {
        expected_provider
    }

    # 4. Checkpoint format v2: the commit log's uniqueIds name files ckpt found.
    if provider == "rocksdb-v2":
        assert report["settings"]["checkpoint_format_version"] == 2
        last = max(commits)
        body = json.loads((ckpt / "commits" / str(last)).read_text().split("\n", 1)[1])
        by_key = {
            (op["id"], part["id"]): part
            for op in report["operators"]
            for store in op["stores"]
            for part in store["partitions"]
        }
        for op_id, partitions in body["stateUniqueIds"].items():
            for part_id, ids in enumerate(partitions):
                part = by_key[(int(op_id), part_id)]
                assert ids[0] in part["unique_ids"][str(last + 1)]
