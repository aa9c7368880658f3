"""The oracle tier for the state file writers: Spark's own ``statestore`` reader, on fixture
copies whose newest state version was replaced by our files (``N.snapshot``, or ``N.zip`` /
``N_<id>.zip`` + new SSTs, no changelog or delta), reads exactly the rows it read from the
files Spark wrote (``fixtures/.../state/*.jsonl``). So Spark loads our snapshots, zips, SSTs
and metadata: HDFS with lz4 and zstd, RocksDB with changelog checkpointing off and on,
checkpoint format v2, and a transformWithState store (virtual column families)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fixture_queries import GEN
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_formats_write import CASES, replace_newest_version

pytestmark = pytest.mark.slow

CASE_DIRS = dict(CASES)
WANTED = (
    "spark4-hdfs-agg",  # lz4
    "spark4-hdfs-agg-zstd",
    "spark4-rocksdb-agg",  # changelog checkpointing off
    "spark4-rocksdb-changelog",
    "spark4-rocksdb-v2",  # checkpoint format v2: <v>_<id>.zip + its CRC32C sidecar
    "spark4-tws-row",  # transformWithState: column families and timers in one store
)


def newest_reads(name: str) -> list[dict[str, Any]]:
    """The successful reads Spark made of the newest version (change feeds excluded: the
    replaced version has no changelog to feed them; unflattened lists are the same bytes)."""
    case = CASE_DIRS[name].parent
    expected = json.loads((case / "expected.json").read_text())
    latest = max(int(p.name) for p in (CASE_DIRS[name] / "commits").iterdir() if p.name.isdigit())
    return [
        r
        for r in expected["state_reads"]
        if "error" not in r
        and r["batch_id"] == latest
        and r["reader_options"].get("readChangeFeed") != "true"
        and "flattenCollectionTypes" not in r["reader_options"]
    ]


def point_schemas_at(root: Path) -> None:
    """Operator metadata v2 names its schema files by the absolute path the query ran in,
    and Spark's reader opens that path: point it at the copy's own ``_stateSchema``."""
    for meta in root.glob("state/*/_metadata/v2/[0-9]*"):
        text = meta.read_text()
        text = re.sub(r"file:[^\"]*?(/state/\d+/_stateSchema/)", f"file:{root}\\1", text)
        assert all(p.startswith(f"file:{root}/") for p in re.findall(r"file:[^\"]*", text))
        meta.write_text(text)
        (meta.parent / f".{meta.name}.crc").unlink(missing_ok=True)


@pytest.mark.parametrize("name", [n for n in WANTED if n in CASE_DIRS])
def test_spark_reads_our_files_as_its_own(
    spark: Any,  # noqa: F811
    name: str,
    tmp_path: Path,
) -> None:
    root = tmp_path / name
    replace_newest_version(CASE_DIRS[name], root)
    point_schemas_at(root)
    reads = newest_reads(name)
    assert reads
    for read in reads:
        saved = CASE_DIRS[name].parent / read["rows_file"]
        want = sorted(line for line in saved.read_text().splitlines() if line)
        confs = read.get("session_confs") or {}
        for key, value in confs.items():
            spark.conf.set(key, value)
        try:
            reader = spark.read.format("statestore")
            for key, value in read["reader_options"].items():
                reader = reader.option(key, value)
            rows = reader.load(str(root)).collect()
        finally:
            for key in confs:
                spark.conf.unset(key)
        got = sorted(json.dumps(GEN.row_to_json(row)) for row in rows)
        assert got == want, read["reader_options"]
