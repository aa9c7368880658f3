"""``ckpt inspect`` on real fixture files and on damaged copies of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.rebuild import plan_version
from ckpt_cli.inspect import split_file_location
from ckpt_cli.replay import read_state
from tests.conftest import CASES_DIR, run_cli

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
ZSTD = CASES_DIR / "spark4-hdfs-agg-zstd" / "checkpoint"
V2 = CASES_DIR / "spark4-rocksdb-v2" / "checkpoint"
ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"


def inspect_json(path: Path | str, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("inspect", str(path), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    report: dict[str, Any] = result.json()
    return result.exit_code, report


def files_of(root: Path, kind: FileKind) -> list[str]:
    return [f.path for f in Checkpoint.open(str(root)).files if f.kind is kind]


def copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "checkpoint"
    shutil.copytree(root, dest)
    return dest


def test_split_file_location() -> None:
    assert split_file_location("s3://b/q/state/0/1/5.delta") == ("s3://b/q", "state/0/1/5.delta")
    assert split_file_location("/d/q/offsets/7") == ("/d/q", "offsets/7")
    assert split_file_location("/d/q/metadata") == ("/d/q", "metadata")


@pytest.mark.parametrize(
    "root", [HDFS, ZSTD, V2, CASES_DIR / "spark35-rocksdb-changelog" / "checkpoint"]
)
def test_every_state_file_is_clean_and_counts_match_its_rows(root: Path) -> None:
    for kind in (FileKind.DELTA, FileKind.SNAPSHOT, FileKind.CHANGELOG, FileKind.ZIP):
        for rel in files_of(root, kind):
            code, report = inspect_json(root / rel, "--limit", "1000")
            assert code == 0, report["problems"]
            assert report["kind"] == kind.value
            assert report["records"]["total"] == len(report["rows"])
            if kind is not FileKind.ZIP:
                assert report["records"]["complete"]
            for check in report.get("checksums", []):
                assert check["ok"]


def test_snapshot_rows_equal_the_rebuilt_state() -> None:
    ckpt = Checkpoint.open(str(HDFS))
    snap = next(f for f in ckpt.files if f.kind is FileKind.SNAPSHOT)
    assert snap.store is not None and snap.version is not None
    plan = plan_version(ckpt, snap.store.operator, snap.store.partition, snap.version)
    assert plan.base == snap and not plan.steps
    rows = read_state(
        ckpt, version=snap.version, operator=plan.operator, partitions=[plan.partition]
    )
    assert rows.plans == [plan]
    want = [{"key": r["key"], "value": r["value"]} for r in rows]
    _, report = inspect_json(HDFS / snap.path)
    got = [{"key": r["key"], "value": r["value"]} for r in report["rows"]]
    assert sorted(json.dumps(r, sort_keys=True) for r in got) == sorted(
        json.dumps(r, sort_keys=True) for r in want
    )


def test_v2_changelog_lineage_matches_commit_log_ids() -> None:
    ckpt = Checkpoint.open(str(V2))
    commit = ckpt.latest_commit
    assert commit is not None and commit.state_unique_ids
    version = commit.batch_id + 1
    uid = commit.state_unique_ids[0][0][0]
    _, report = inspect_json(V2 / f"state/0/0/{version}_{uid}.changelog")
    assert report["changelog_format_version"] == 3
    # The lineage names the ancestors by the ids their own commits recorded.
    for entry in report["lineage"]:
        batch = entry["version"] - 1
        if batch in ckpt.batches.commits:
            ids = ckpt.commit(batch).state_unique_ids
            assert ids is not None and ids[0][0][0] == entry["unique_id"]


def test_zip_names_present_ssts_and_numkeys_equals_rows() -> None:
    rel = files_of(ROCKS, FileKind.ZIP)[-1]
    code, report = inspect_json(ROCKS / rel, "--limit", "1000")
    assert code == 0
    assert all(f["status"] == "ok" for f in report["metadata"]["shared_files"])
    assert report["metadata"]["num_keys"] == report["records"]["total"] == len(report["rows"])
    assert "metadata" in {e["name"] for e in report["zip_entries"]}


@pytest.mark.parametrize(
    ("rel", "field"),
    [("offsets", "conf"), ("commits", "next_batch_watermark_ms"), ("metadata", "query_id")],
)
def test_log_files(rel: str, field: str) -> None:
    path = HDFS / rel
    if path.is_dir():
        path = max((p for p in path.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    code, report = inspect_json(path)
    assert code == 0 and field in report["header"]


def test_schema_and_operator_metadata() -> None:
    _, report = inspect_json(HDFS / "state/0/0/_metadata/schema")
    names = [c["name"] for c in report["header"]["column_families"][0]["key"]]
    assert names == ["k"]
    _, report = inspect_json(HDFS / "state/0/_metadata/metadata")
    assert report["header"]["operator_name"] == "stateStoreSave"


def test_relative_path_with_checkpoint_option() -> None:
    rel = files_of(HDFS, FileKind.DELTA)[0]
    result = run_cli("inspect", "-c", str(HDFS), rel, "--json")
    assert result.exit_code == 0 and result.json()["path"] == rel


def test_human_output_shows_rows_and_codec() -> None:
    rel = files_of(ZSTD, FileKind.SNAPSHOT)[0]
    result = run_cli("inspect", str(ZSTD / rel))
    assert result.exit_code == 0
    assert "zstd" in result.stdout and "First" in result.stdout


# -- damaged copies ----------------------------------------------------------------------------


def test_truncated_delta(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    rel = max(files_of(root, FileKind.DELTA), key=lambda r: (root / r).stat().st_size)
    data = (root / rel).read_bytes()
    (root / rel).write_bytes(data[: len(data) - 10])
    code, report = inspect_json(root / rel)
    assert code == 1
    assert any("truncated" in p or "ends inside" in p for p in report["problems"])
    assert not report["records"]["complete"]


def test_flipped_byte_in_zstd_file_is_caught(tmp_path: Path) -> None:
    """zstd-jni writes frames without a content checksum, so a flipped byte may decode to
    other bytes; then the Hadoop .crc sidecar catches it."""
    root = copy(ZSTD, tmp_path)
    for rel in files_of(root, FileKind.SNAPSHOT) + files_of(root, FileKind.DELTA):
        data = bytearray((root / rel).read_bytes())
        data[len(data) // 2] ^= 0x55
        (root / rel).write_bytes(bytes(data))
        code, report = inspect_json(root / rel)
        assert code == 1, rel
        assert report["problems"]


def test_zip_naming_a_missing_or_resized_sst(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    rel = files_of(root, FileKind.ZIP)[-1]
    _, report = inspect_json(root / rel)
    shared = report["metadata"]["shared_files"]
    (root / shared[0]["path"]).unlink()
    if len(shared) > 1:
        with open(root / shared[1]["path"], "ab") as fh:
            fh.write(b"x")
    code, report = inspect_json(root / rel)
    assert code == 1
    statuses = [f["status"] for f in report["metadata"]["shared_files"]]
    assert statuses[0] == "missing"
    if len(shared) > 1:
        assert statuses[1] == "size-mismatch"
    assert report["rows"] == []


def test_spark_checksum_mismatch(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    rel = files_of(root, FileKind.ZIP)[0]
    crc = root / (rel + ".crc")
    obj = json.loads(crc.read_text())
    obj["value"] += 1
    crc.write_text(json.dumps(obj))
    (root / rel.rsplit("/", 1)[0] / f".{rel.rsplit('/', 1)[1]}.crc.crc").unlink(missing_ok=True)
    code, report = inspect_json(root / rel)
    assert code == 1
    assert any("CRC32C" in p for p in report["problems"])


def test_wrong_codec_file(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    rel = files_of(root, FileKind.DELTA)[0]
    (root / rel).write_bytes(b"PK\x03\x04" + bytes(40))
    code, report = inspect_json(root / rel)
    assert code == 1
    assert any("expected a lz4 stream" in p and "(byte 0)" in p for p in report["problems"])


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [str(HDFS / "state/0/0/999.delta")],
        [str(HDFS / "state/0/0")],
        ["/nowhere/at/all.delta"],
        ["-c", str(HDFS), "offsets/99999"],
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str]) -> None:
    result = run_cli("inspect", *args)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr
