"""``ckpt validate``: healthy fixtures give no error or warning; each finding code is produced
by a corrupted copy of a real fixture, with the exact code and path."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.errors import FormatError
from ckpt_cli.validate import CODES, validate
from tests.conftest import (
    CASES,
    CASES_DIR,
    ELSEWHERE,
    UPGRADE_WARNING,
    Case,
    case_params,
    known_findings,
    run_cli,
)

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"
V2 = CASES_DIR / "spark4-rocksdb-v2" / "checkpoint"
JOIN = CASES_DIR / "spark4-join" / "checkpoint"


def findings(root: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    result = run_cli("validate", str(root), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    data = result.json()
    assert data["ok"] == (result.exit_code == 0)
    found: list[dict[str, Any]] = data["findings"]
    return result.exit_code, found


def codes(found: list[dict[str, Any]]) -> set[str]:
    return {f["code"] for f in found}


@pytest.mark.parametrize("case", case_params())
@pytest.mark.parametrize("mode", [[], ["--all-versions"], ["--all-versions", "--deep"]])
def test_healthy_fixtures_have_no_error_or_warning(case: Case, mode: list[str]) -> None:
    if "crash" in case.name:
        pytest.skip("crashed runs are checked in test_crashed_runs")
    code, found = findings(case.checkpoint, "--fail-on", "warning", *mode)
    # Not healthy: the findings are why Spark (or a newer one) cannot restart it where it is.
    known = known_findings(case, deep="--deep" in mode)
    assert {f["code"] for f in found if f["severity"] != "info"} == known, found
    assert code == (1 if known else 0)
    if case.name in UPGRADE_WARNING:
        assert all(f["severity"] != "error" for f in found if f["code"] != ELSEWHERE)


def test_every_code_has_a_hint_and_severity() -> None:
    for code, (severity, hint) in CODES.items():
        assert severity in ("error", "warning", "info") and hint, code


# -- corrupted copies ----------------------------------------------------------------------------


def copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / root.parent.name
    shutil.copytree(root, dest)
    return dest


def latest(root: Path, log: str) -> int:
    return max(int(p.name) for p in (root / log).iterdir() if p.name.isdigit())


def drop_crc(path: Path) -> None:
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def needed_delta(root: Path, partition: int = 0) -> Path:
    version = latest(root, "commits") + 1
    return root / f"state/0/{partition}/{version}.delta"


def rewrite(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    drop_crc(path)


Corruption = Callable[[Path], tuple[str, str]]  # -> (code, path that must be named)


def missing_metadata(root: Path) -> tuple[str, str]:
    (root / "metadata").unlink()
    drop_crc(root / "metadata")
    return "MISSING_METADATA", "metadata"


def corrupt_metadata(root: Path) -> tuple[str, str]:
    rewrite(root / "metadata", b"not json")
    return "CORRUPT_METADATA", "metadata"


def corrupt_offsets(root: Path) -> tuple[str, str]:
    n = latest(root, "offsets")
    rewrite(root / f"offsets/{n}", b'v1\n{"batchWatermarkMs":0,')
    return "CORRUPT_OFFSETS", f"offsets/{n}"


def corrupt_commit(root: Path) -> tuple[str, str]:
    n = latest(root, "commits")
    rewrite(root / f"commits/{n}", b"v1\n{nope")
    return "CORRUPT_COMMIT", f"commits/{n}"


def unsupported_log_version(root: Path) -> tuple[str, str]:
    n = latest(root, "offsets")
    rewrite(root / f"offsets/{n}", b"v99\n{}")
    return "UNSUPPORTED_VERSION", f"offsets/{n}"


def commit_without_offsets(root: Path) -> tuple[str, str]:
    n = latest(root, "offsets") - 1
    (root / f"offsets/{n}").unlink()
    drop_crc(root / f"offsets/{n}")
    return "COMMIT_WITHOUT_OFFSETS", f"commits/{n}"


def batch_gap(root: Path) -> tuple[str, str]:
    n = latest(root, "commits") - 2
    (root / f"commits/{n}").unlink()
    drop_crc(root / f"commits/{n}")
    return "BATCH_GAP", f"commits/{n}"


def uncommitted_batches(root: Path) -> tuple[str, str]:
    n = latest(root, "commits")
    for b in (n, n - 1):
        (root / f"commits/{b}").unlink()
        drop_crc(root / f"commits/{b}")
    return "UNCOMMITTED_BATCH", f"offsets/{n - 1}"


def missing_state_file(root: Path) -> tuple[str, str]:
    path = needed_delta(root)
    path.unlink()
    drop_crc(path)
    return "MISSING_STATE_FILE", str(path.relative_to(root))


def empty_file(root: Path) -> tuple[str, str]:
    path = needed_delta(root)
    rewrite(path, b"")
    return "EMPTY_FILE", str(path.relative_to(root))


def truncated_file(root: Path) -> tuple[str, str]:
    path = needed_delta(root)
    rewrite(path, path.read_bytes()[:-12])
    return "TRUNCATED_FILE", str(path.relative_to(root))


def corrupt_file(root: Path) -> tuple[str, str]:
    path = needed_delta(root)
    data = bytearray(path.read_bytes())
    data[8] = 0x77  # an lz4 block token Spark never writes
    rewrite(path, bytes(data))
    return "CORRUPT_FILE", str(path.relative_to(root))


def crc_mismatch(root: Path) -> tuple[str, str]:
    path = needed_delta(root)
    crc = path.parent / f".{path.name}.crc"
    data = bytearray(crc.read_bytes())
    data[-1] ^= 0xFF
    crc.write_bytes(bytes(data))
    return "CRC_MISMATCH", str(crc.relative_to(root))


def orphan_crc(root: Path) -> tuple[str, str]:
    (root / "state/0/0/.1234.delta.crc").write_bytes(b"crc\x00\x00\x00\x02\x00")
    return "ORPHAN_FILE", "state/0/0/.1234.delta.crc"


def temp_file(root: Path) -> tuple[str, str]:
    name = ".11.delta.0b3b0a9e-2f5e-4a43-9c7e-3d3b3c1f0a11.TID42.tmp"
    (root / "state/0/1" / name).write_bytes(b"LZ4Block")
    return "TEMP_FILE", f"state/0/1/{name}"


def partition_count(root: Path) -> tuple[str, str]:
    shutil.rmtree(root / "state/0/1")
    return "PARTITION_COUNT_MISMATCH", "state/0"


def missing_schema(root: Path) -> tuple[str, str]:
    (root / "state/0/0/_metadata/schema").unlink()
    return "MISSING_SCHEMA", "state/0"


def corrupt_schema(root: Path) -> tuple[str, str]:
    rewrite(root / "state/0/0/_metadata/schema", b"\x00\x02v2\x00\x00\x00\x05{oops")
    return "CORRUPT_SCHEMA", "state/0/0/_metadata/schema"


def unknown_file(root: Path) -> tuple[str, str]:
    (root / "notes.txt").write_text("copied here by someone")
    return "UNKNOWN_FILE", "notes.txt"


HDFS_CORRUPTIONS: list[Corruption] = [
    missing_metadata,
    corrupt_metadata,
    corrupt_offsets,
    corrupt_commit,
    unsupported_log_version,
    commit_without_offsets,
    batch_gap,
    uncommitted_batches,
    missing_state_file,
    empty_file,
    truncated_file,
    corrupt_file,
    crc_mismatch,
    orphan_crc,
    temp_file,
    partition_count,
    missing_schema,
    corrupt_schema,
    unknown_file,
]


@pytest.mark.parametrize("corrupt", HDFS_CORRUPTIONS, ids=lambda c: c.__name__)
def test_hdfs_corruption_gives_its_code_and_path(corrupt: Corruption, tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    code, path = corrupt(root)
    _, found = findings(root, "--fail-on", "warning")
    matching = [f for f in found if f["code"] == code]
    assert matching, found
    assert any(path in f["paths"] for f in matching), matching


def test_single_uncommitted_batch_is_info(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    n = latest(root, "commits")
    (root / f"commits/{n}").unlink()
    drop_crc(root / f"commits/{n}")
    exit_code, found = findings(root)
    assert exit_code == 0
    assert [(f["code"], f["severity"]) for f in found] == [("UNCOMMITTED_BATCH", "info")]
    assert found[0]["batches"] == [n]


def test_two_uncommitted_batches_are_an_error(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    uncommitted_batches(root)
    exit_code, found = findings(root)
    assert exit_code == 1
    assert [f["severity"] for f in found if f["code"] == "UNCOMMITTED_BATCH"] == ["error"]


def _zip_metadata(root: Path) -> tuple[Path, dict[str, Any]]:
    n = latest(root, "commits") + 1
    zip_path = root / f"state/0/0/{n}.zip"
    import zipfile

    with zipfile.ZipFile(zip_path) as zf:
        meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
    return zip_path, meta


def test_missing_sst(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    _, meta = _zip_metadata(root)
    sst = root / "state/0/0/SSTs" / meta["sstFiles"][0]["dfsSstFileName"]
    sst.unlink()
    drop_crc(sst)
    _, found = findings(root)
    assert any(
        f["code"] == "MISSING_SST" and str(sst.relative_to(root)) in f["paths"] for f in found
    )


def test_sst_size_mismatch(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    _, meta = _zip_metadata(root)
    sst = root / "state/0/0/SSTs" / meta["sstFiles"][0]["dfsSstFileName"]
    with open(sst, "ab") as fh:
        fh.write(b"\x00")
    drop_crc(sst)
    _, found = findings(root)
    assert any(
        f["code"] == "SST_SIZE_MISMATCH" and str(sst.relative_to(root)) in f["paths"] for f in found
    )


def _v2_ids(root: Path, batch: int) -> dict[str, Any]:
    text = (root / f"commits/{batch}").read_text()
    header, body = text.split("\n", 1)
    data: dict[str, Any] = json.loads(body)
    return data


def test_lineage_mismatch(tmp_path: Path) -> None:
    """commits/7 records a uniqueId for version 8 that the lineage of 9_<id>.changelog does
    not name."""
    root = copy(V2, tmp_path)
    ckpt = Checkpoint.open(str(root))
    commits = ckpt.batches.commits
    older = commits[-3]
    body = _v2_ids(root, older)
    body["stateUniqueIds"]["0"][0][0] = "00000000-0000-0000-0000-000000000000"
    rewrite(root / f"commits/{older}", ("v2\n" + json.dumps(body)).encode())
    _, found = findings(root, "--batch", str(older + 1))
    assert any(
        f["code"] == "LINEAGE_MISMATCH" and f"commits/{older}" in f["paths"] for f in found
    ), found


def test_missing_unique_id_file(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    n = latest(root, "commits")
    uid = _v2_ids(root, n)["stateUniqueIds"]["0"][1][0]
    for ext in ("zip", "changelog"):
        for p in (root / "state/0/1").glob(f"{n + 1}_{uid}.{ext}*"):
            p.unlink()
            drop_crc(p)
    _, found = findings(root)
    assert any(
        f["code"] == "MISSING_UNIQUE_ID_FILE" and f"state/0/1/{n + 1}_{uid}.changelog" in f["paths"]
        for f in found
    ), found


def test_missing_join_store_partition(tmp_path: Path) -> None:
    root = copy(JOIN, tmp_path)
    shutil.rmtree(root / "state/0/1/right-keyToNumValues")
    _, found = findings(root)
    assert "PARTITION_COUNT_MISMATCH" in codes(found)
    assert any(
        f["code"] == "MISSING_STATE_FILE" and "state/0/1/right-keyToNumValues" in f["paths"]
        for f in found
    )


def test_deep_finds_damage_outside_the_restart_path(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    ckpt = Checkpoint.open(str(root))
    target = latest(root, "commits") + 1
    old = next(
        f for f in ckpt.of_kind(FileKind.DELTA) if f.version is not None and f.version < target - 3
    )
    rewrite(root / old.path, (root / old.path).read_bytes()[:-6])
    assert findings(root)[0] == 0  # a restart does not need it
    exit_code, found = findings(root, "--deep")
    assert exit_code == 1
    assert any(f["code"] == "TRUNCATED_FILE" and old.path in f["paths"] for f in found)


def test_batch_option_checks_that_batch(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    ckpt = Checkpoint.open(str(root))
    oldest = ckpt.batches.commits[0]
    report = validate(ckpt, batch=oldest)
    assert report.target["version"] == oldest + 1
    result = run_cli("validate", str(root), "--batch", "999999")
    assert result.exit_code == 2 and "batch 999999 has no commit" in result.stderr


def test_junit_report(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    truncated_file(root)
    out = tmp_path / "junit.xml"
    result = run_cli("validate", str(root), "--junit", str(out))
    assert result.exit_code == 1
    suite = ET.parse(out).getroot()
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert "TRUNCATED_FILE" in failed
    assert int(suite.get("failures") or 0) == len(failed)
    assert {c.get("name") for c in suite.iter("testcase")} == set(CODES)


def test_human_output_ends_in_a_verdict(tmp_path: Path) -> None:
    result = run_cli("validate", str(HDFS))
    assert result.exit_code == 0
    assert result.stdout.strip().splitlines()[-1].startswith("OK")
    root = copy(HDFS, tmp_path)
    missing_state_file(root)
    result = run_cli("validate", str(root))
    assert result.exit_code == 1 and "MISSING_STATE_FILE" in result.stdout
    assert result.stdout.strip().splitlines()[-1].startswith("NOT OK")


def test_stats_count_reads() -> None:
    report = validate(Checkpoint.open(str(HDFS)))
    assert report.stats["list_calls"] >= 1
    assert report.stats["files_read"] >= report.stats["files_checked"] > 0
    assert report.stats["bytes_read"] > 0


def test_validate_leaves_the_callers_checkpoint_as_it_was(tmp_path: Path) -> None:
    """validate reads an unreadable latest offsets entry as a finding, on its own view: the
    caller's checkpoint still raises on it."""
    root = copy(HDFS, tmp_path)
    rewrite(root / f"offsets/{latest(root, 'offsets')}", b"v1\n{not json")
    ckpt = Checkpoint.open(str(root))
    report = validate(ckpt)
    assert "CORRUPT_OFFSETS" in {f.code for f in report.findings}
    assert not report.ok and report.status == "problems"
    assert ckpt.tolerant is False
    with pytest.raises(FormatError):
        _ = ckpt.latest_offsets


def test_report_ok_and_status_follow_fail_on() -> None:
    report = validate(Checkpoint.open(str(HDFS)))
    assert report.ok and report.status == "ok" and report.to_json()["ok"]
    report.fail_on = "info"
    assert report.ok == (not report.findings)
    assert report.to_json()["ok"] == report.ok
    assert report.status == ("ok" if report.ok else "problems")
