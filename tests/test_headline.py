"""The headline of ``ckpt versions``: last activity, watermark, last committed batch, and
"restartable: yes / no, because ...", from validate's own restart checks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ckpt_cli
from ckpt_cli.formats import logs
from ckpt_cli.units import iso_ms
from ckpt_cli.validate.headline import headline
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import plan_latest_batch, touch_everything
from tests.test_batches import copy_checkpoint

JOIN = CASES_DIR / "spark4-join" / "checkpoint"
AGG = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"


def headline_line(text: str) -> str:
    """The headline: the first paragraph of `versions`, as one line at any width."""
    return " ".join(text.split("\n\n")[0].split())


def test_healthy_checkpoint(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path, JOIN)
    latest = logs.parse_offsets("o", 19, (root / "offsets" / "19").read_bytes())
    planned = latest.batch_timestamp_ms / 1000
    # As Spark left them: each entry written as its batch was planned, the commit after.
    for log in ("offsets", "commits"):
        for f in (root / log).iterdir():
            os.utime(f, (planned - 60, planned - 60))
    os.utime(root / "offsets" / "19", (planned + 0.25, planned + 0.25))
    os.utime(root / "commits" / "19", (planned + 5, planned + 5))
    h = headline(ckpt_cli.open(str(root)), now=planned + 600)
    assert h.restartable and h.because == [] and h.latest_committed == 19
    # The last activity is the last batch's own time, as `ckpt batches` shows it.
    assert h.last_activity_ms == latest.batch_timestamp_ms
    assert h.last_activity == iso_ms(h.last_activity_ms) == h.latest_planned
    assert h.last_activity_age_seconds == 600.0
    assert h.files_modified_ms == latest.batch_timestamp_ms + 250  # offsets/, not commits/
    assert h.files_modified_age_seconds == 599.75 and not h.files_apart
    assert h.watermark == iso_ms(latest.batch_watermark_ms) and h.watermark is not None

    first = headline_line(run_cli("versions", str(root)).stdout)
    assert first.startswith(f"last activity {str(iso_ms(latest.batch_timestamp_ms))[:10]} ")
    assert "files modified" not in first  # written with the batch: one time is enough
    assert "last committed 19 · restartable: yes" in first
    assert "watermark 2024-01-01 00:35:30" in first


def test_a_copy_shows_the_batch_time_and_the_file_time(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path)
    planned = plan_latest_batch(root, 3 * 86400 + 5 * 3600 + 1800)  # 3d 5h 30m ago
    touch_everything(root)  # copied just now
    h = headline(ckpt_cli.open(str(root)))
    assert h.last_activity_ms == planned and h.files_apart
    assert h.last_activity_age_seconds is not None and h.files_modified_age_seconds is not None
    assert 3 * 86400 + 5 * 3600 + 1800 <= h.last_activity_age_seconds < 3 * 86400 + 6 * 3600
    assert 0 <= h.files_modified_age_seconds < 60
    first = headline_line(run_cli("versions", str(root)).stdout)
    assert " UTC (3d 5h ago) · files modified " in first and "s ago · watermark" in first


def test_versions_and_batches_show_the_same_age(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path)
    planned = plan_latest_batch(root, 2 * 86400 + 7 * 3600 + 1800)  # 2d 7h 30m ago
    touch_everything(root)
    versions = run_cli("versions", str(root), "--json").json()["headline"]
    batches = run_cli("batches", str(root), "--json").json()["batches"]
    assert versions["last_activity_ms"] == batches[-1]["planned_ms"] == planned
    assert abs(versions["last_activity_age_seconds"] - batches[-1]["age_seconds"]) < 30
    first = headline_line(run_cli("versions", str(root)).stdout)
    table = run_cli("batches", str(root), "--last", "1").stdout
    assert "(2d 7h ago)" in first
    (row,) = [line for line in table.splitlines() if line.split()[:1] == ["9"]]
    assert "  2d 7h  " in row


def test_unreadable_latest_offsets_still_shows_everything(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path)
    (root / "offsets" / "9").write_bytes(b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":17953')
    text = run_cli("versions", str(root))
    assert text.exit_code == 0
    first = " ".join(text.stdout.split("\n\n")[0].split())
    assert "restartable: no, because offsets/9 (line 2): the batch metadata is not valid" in first
    assert "Query id" in text.stdout and "Operator 0" in text.stdout  # the rest follows

    data = run_cli("versions", str(root), "--json").json()
    assert data["headline"]["restartable"] is False
    assert data["headline"]["codes"] == ["CORRUPT_OFFSETS"]
    assert data["batches"]["latest_offsets"] == 9
    assert data["settings"]["shuffle_partitions"] == 2  # the conf of offsets/8


def test_reasons_are_validates_errors(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path)
    (root / "state" / "0" / "1" / "8.delta").unlink()  # in the version a restart loads (8)
    (root / "commits" / "9").unlink()
    (root / "commits" / "8").unlink()  # two batches in flight: Spark re-runs only the last
    ckpt = ckpt_cli.open(str(root))
    h = headline(ckpt)
    report = ckpt.validate()
    errors = {f.code for f in report.findings if f.severity == "error"}
    assert not h.restartable and set(h.codes) == errors
    assert {"UNCOMMITTED_BATCH", "MISSING_STATE_FILE"} <= set(h.codes)
    assert len(h.because) == len(report.at_or_above("error"))

    first = run_cli("versions", str(root)).stdout.split("\n\n")[0]
    assert "restartable: no, because" in first and f"(and {len(h.because) - 1} more" in first


def test_damaged_state_bytes_are_found_as_validate_finds_them(tmp_path: Path) -> None:
    # One verdict: the headline decodes what a restart loads, as validate does.
    root = copy_checkpoint(tmp_path)
    delta = root / "state" / "0" / "0" / "10.delta"
    delta.write_bytes(delta.read_bytes()[:-10])
    h = headline(ckpt_cli.open(str(root)))
    report = ckpt_cli.open(str(root)).validate()
    assert h.restartable is False and h.decoded and not report.ok
    assert h.codes == ["TRUNCATED_FILE"] == sorted({f.code for f in report.at_or_above("error")})
    first = run_cli("versions", str(root)).stdout.split("\n\n")[0]
    assert "restartable: no, because" in first and "10.delta" in first


def test_a_large_restart_state_is_not_called_restartable_undecoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Over the headline's decoding budget the state files are planned and found, not
    # decoded: the verdict is "not known", saying what was not checked, never "yes".
    monkeypatch.setattr("ckpt_cli.validate.headline.DECODE_BYTES", 0)
    root = copy_checkpoint(tmp_path)
    delta = root / "state" / "0" / "0" / "10.delta"
    delta.write_bytes(delta.read_bytes()[:-10])
    h = headline(ckpt_cli.open(str(root)))
    assert h.restartable is None and not h.decoded and h.codes == []
    assert h.not_decoded is not None and h.not_decoded["files"] >= 2
    assert "not decoded; ckpt validate decodes them" in h.unchecked
    first = run_cli("versions", str(root)).stdout.split("\n\n")[0]
    assert "restartable: not known" in first and "restartable: yes" not in first
    data = json.loads(run_cli("versions", str(root), "--json").stdout)["headline"]
    assert data["restartable"] is None and data["not_decoded"] == h.not_decoded
    # Damage the budget does not hide: the zips and logs are still read.
    (root / "commits" / "9").write_text("v1\n{garbage")
    assert headline(ckpt_cli.open(str(root))).restartable is False
