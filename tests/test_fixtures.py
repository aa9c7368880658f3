"""The model of every bundled fixture agrees with what Spark said about it.

Each case in fixtures/checkpoints/ was written by a real PySpark query; its expected.json holds
what Spark reported (query id, the batches it ran, its state-metadata source, and which batches
its statestore source could read). Nothing here is typed in by hand.
"""

from __future__ import annotations

import json
import zipfile
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.versions import describe_versions
from tests.conftest import CASES, Case, case_params, run_cli

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures in fixtures/checkpoints")


def open_case(case: Case) -> Checkpoint:
    return Checkpoint.open(str(case.checkpoint))


@pytest.mark.parametrize("case", case_params())
def test_query_and_batches(case: Case) -> None:
    ckpt = open_case(case)
    expected = case.expected
    assert ckpt.query_id == expected["query_id"]
    batches_run = expected["batches_run"]
    b = ckpt.batches
    assert b.latest_committed == max(batches_run)
    assert set(b.commits) <= set(batches_run)
    assert b.commits_gaps == () and b.offsets_gaps == ()
    assert ckpt.unknown_files == []
    crash = expected.get("crash")
    # A restart Spark refused (issue 29's runs) may leave the batch it planned uncommitted.
    planned = {p for r in expected.get("runs", []) if not r["ok"] for p in r["planned_batches"]}
    if crash is None:
        # A query stopped cleanly leaves nothing in flight and no temp files.
        assert set(b.offsets) <= set(batches_run) | planned
        assert b.in_flight == tuple(sorted(planned))
        assert ckpt.temp_files == []
        return
    # A driver killed mid-batch: the planned batch has offsets but no commit, and the stores
    # keep the temp files their tasks had open (what Spark left, recorded by the generator).
    assert b.in_flight == (crash["in_flight_batch"],)
    assert set(b.offsets) <= set(batches_run) | {crash["in_flight_batch"]}
    assert list(b.commits) == crash["commits_on_disk"]
    assert list(b.offsets) == crash["offsets_on_disk"]
    assert sorted(f.path for f in ckpt.temp_files) == crash["temp_files"]
    # Each is an atomic write of a state file of the in-flight batch's version.
    version = crash["in_flight_batch"] + 1
    for f in ckpt.temp_files:
        assert f.target is not None
        target = f.target.rsplit("/", 1)[-1]
        assert target.split(".")[0].split("_")[0] == str(version), f.path


@pytest.mark.parametrize("case", case_params())
def test_operators_stores_partitions(case: Case) -> None:
    ckpt = open_case(case)
    expected = case.expected
    want = {op["id"]: op for op in expected["operators"]}
    assert set(ckpt.operators) == set(want)
    for op_id, op in ckpt.operators.items():
        assert list(op.stores) == list(want[op_id]["stores"])
        for store in op.stores.values():
            assert len(store.partitions) == want[op_id]["partitions"]
    latest = ckpt.latest_offsets
    assert latest is not None
    partitions = {op["partitions"] for op in expected["operators"]}
    assert {latest.shuffle_partitions} == partitions


@pytest.mark.parametrize("case", case_params())
@pytest.mark.parametrize("source", ["state_metadata", "own_state_metadata"])
def test_against_spark_state_metadata(case: Case, source: str) -> None:
    """Spark 4.3's state-metadata rows and (4.0-4.2 cases) those of the writing Spark."""
    if source not in case.expected:
        pytest.skip("no own state-metadata read (written by Spark 4.3 or 3.x)")
    rows = case.expected[source]
    if isinstance(rows, dict):
        pytest.skip(f"Spark's state-metadata reader failed on this case: {rows.get('error')}")
    if not rows:
        pytest.skip("Spark's state-metadata source returned no rows (Spark 3.x checkpoint)")
    ckpt = open_case(case)
    spark_stores = {(r["operatorId"], r["stateStoreName"]): r for r in rows}
    ours = {
        (op.id, name): store for op in ckpt.operators.values() for name, store in op.stores.items()
    }
    assert set(ours) == set(spark_stores)
    for key, row in spark_stores.items():
        assert len(ours[key].partitions) == row["numPartitions"]
        assert row["maxBatchId"] == ckpt.batches.latest_committed
        meta = ckpt.operator_metadata(key[0])
        if meta is not None:
            assert meta.operator_name == row["operatorName"]


@pytest.mark.parametrize("case", case_params())
def test_batches_spark_could_read_have_state_files(case: Case) -> None:
    """Every batch Spark's statestore source read has version batch+1 on disk in every
    partition of that store (as a delta/snapshot, zip or changelog)."""
    ckpt = open_case(case)
    reads = [r for r in case.expected.get("state_reads", []) if "error" not in r]
    if not reads:
        pytest.skip("no successful statestore reads recorded")
    for read in reads:
        op = ckpt.operators[read["operator_id"]]
        names = [read["store_name"]] if read.get("store_name") else list(op.stores)
        if read.get("join_side"):
            names = [n for n in op.stores if n.startswith(read["join_side"] + "-")]
        # Join state formats 3 and 4: the join's stores are column families of its one store.
        names = [n for n in names if n in op.stores] or list(op.stores)
        version = read["batch_id"] + 1
        for name in names:
            for part in op.stores[name].partitions.values():
                if read.get("reader_options", {}).get("snapshotPartitionId") not in (
                    None,
                    part.id,
                    str(part.id),
                ):
                    continue
                assert version in part.versions, (read, part.path, part.version_ids)


@pytest.mark.parametrize("case", case_params())
def test_format_v2_unique_ids_name_present_files(case: Case) -> None:
    ckpt = open_case(case)
    if ckpt.checkpoint_format_version != 2:
        pytest.skip("checkpoint format v1")
    commit = ckpt.latest_commit
    assert commit is not None and commit.state_unique_ids
    version = commit.batch_id + 1
    for op_id, partitions in commit.state_unique_ids.items():
        stores = list(ckpt.operators[op_id].stores.values())
        for part_id, ids in enumerate(partitions):
            for store, unique_id in zip(stores, ids, strict=True):
                assert unique_id in store.partitions[part_id].versions[version].unique_ids


@pytest.mark.parametrize("case", case_params())
def test_cli_json_matches_library(case: Case) -> None:
    result = run_cli("versions", str(case.checkpoint), "--json")
    assert result.exit_code == 0, result.stderr
    report: dict[str, Any] = result.json()
    assert report["status"] == "ok"
    library = json.loads(json.dumps(describe_versions(open_case(case)).to_json()))
    for doc in (report, library):  # ages, measured at each call
        for key in ("last_activity_age_seconds", "files_modified_age_seconds"):
            assert isinstance(doc["headline"].pop(key), float)
    assert report == library
    # Every file is counted exactly once across the kinds.
    assert sum(report["files"]["by_kind"].values()) == report["files"]["count"]


@pytest.mark.parametrize("case", case_params())
def test_human_output_mentions_every_store(case: Case) -> None:
    result = run_cli("versions", str(case.checkpoint))
    assert result.exit_code == 0, result.stderr
    ckpt = open_case(case)
    for op in ckpt.operators.values():
        for name in op.stores:
            assert f"Operator {op.id}" in result.stdout and name in result.stdout


@pytest.mark.parametrize("case", case_params())
def test_partition_filter(case: Case) -> None:
    result = run_cli("versions", str(case.checkpoint), "--json", "--partition", "1")
    report = result.json()
    for op in report["operators"]:
        for store in op["stores"]:
            assert [p["id"] for p in store["partitions"]] == [1]


def test_hadoop_crc_sidecars_cover_listed_files() -> None:
    """Local checkpoints carry a Hadoop .crc for every file; each covers a listed file."""
    for case in CASES:
        ckpt = open_case(case)
        paths = {f.path for f in ckpt.files}
        for f in ckpt.of_kind(FileKind.HADOOP_CRC):
            assert f.target in paths, f.path


CRASH_CASES = [pytest.param(c, id=c.name) for c in CASES if "crash" in c.expected]


@pytest.mark.parametrize("case", CRASH_CASES)
def test_crashed_runs(case: Case) -> None:
    """A driver killed mid-batch (fixtures/README.md, crash cases). Spark restarted a copy of
    the checkpoint and re-ran exactly the in-flight batch; ckpt validate agrees that nothing
    is broken: the batch is reported as uncommitted (info), the leftovers as temp files."""
    crash, restart = case.expected["crash"], case.expected["restart"]
    assert restart["ok"], restart
    assert restart["query_id"] == case.expected["query_id"]
    assert restart["batches_run"] == [crash["in_flight_batch"]]
    # Spark never deletes the temp files of the killed tasks, not even on restart.
    assert restart["temp_files"] == crash["temp_files"]
    for read in restart["state_reads"]:
        if "error" not in read:
            assert (case.root / read["rows_file"]).is_file()
    for mode in ([], ["--all-versions", "--deep"]):
        result = run_cli("validate", str(case.checkpoint), "--json", *mode)
        assert result.exit_code == 0, result.stdout
        found = result.json()["findings"]
        assert not [f for f in found if f["severity"] == "error"], found
        uncommitted = [f for f in found if f["code"] == "UNCOMMITTED_BATCH"]
        assert [f["batches"] for f in uncommitted] == [[crash["in_flight_batch"]]]
        temps = sorted(p for f in found if f["code"] == "TEMP_FILE" for p in f["paths"])
        assert temps == crash["temp_files"]


@pytest.mark.parametrize("case", CRASH_CASES)
def test_crashed_runs_leave_partial_files_only_as_temp_files_or_unnamed_ssts(case: Case) -> None:
    """What the killed batch wrote: atomic writes (deltas, changelogs, Spark's checksum files)
    are still hidden temp files; RocksDB's SST upload (Hadoop copyFromLocalFile, not atomic)
    leaves an empty SST under its final name, which no zip names."""
    crash = case.expected["crash"]
    ckpt = open_case(case)
    kinds = {f.path: f.kind for f in ckpt.files}
    written = {
        path: size
        for path, size in crash["in_flight_files"].items()
        if path.startswith("state/") and kinds[path] not in (FileKind.TEMP, FileKind.HADOOP_CRC)
    }
    for path, size in written.items():
        assert kinds[path] == FileKind.SST and size == 0, (path, size)
        partition = case.checkpoint / path.split("/SSTs/")[0]
        name = path.rsplit("/", 1)[-1]
        for archive in partition.glob("*.zip"):
            with zipfile.ZipFile(archive) as zf:
                assert name not in zf.read("metadata").decode(), (archive, name)
    # Held in the SST upload: one empty SST per partition; held at commit(): none.
    uploading = crash["held_at"].startswith("org.apache.hadoop.io.IOUtils.copyBytes")
    partitions = sum(op["partitions"] for op in case.expected["operators"])
    assert len(written) == (partitions if uploading else 0)
