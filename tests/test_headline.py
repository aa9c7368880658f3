"""The headline of ``ckpt versions``: last activity, watermark, last committed batch, and
"restartable: yes / no, because ...", from validate's own restart checks."""

from __future__ import annotations

import os
from pathlib import Path

import ckpt_cli
from ckpt_cli.formats import logs
from ckpt_cli.headline import headline
from ckpt_cli.units import iso_ms
from tests.conftest import CASES_DIR, run_cli
from tests.test_batches import copy_checkpoint

JOIN = CASES_DIR / "spark4-join" / "checkpoint"
AGG = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"


def test_healthy_checkpoint(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path, JOIN)
    when = 1_795_000_000.25
    for log in ("offsets", "commits"):
        for f in (root / log).iterdir():
            os.utime(f, (when - 60, when - 60))
    os.utime(root / "commits" / "19", (when, when))
    h = headline(ckpt_cli.open(str(root)))
    latest = logs.parse_offsets("o", 19, (root / "offsets" / "19").read_bytes())
    assert h.restartable and h.because == [] and h.latest_committed == 19
    assert h.last_activity_ms == 1_795_000_000_250 and h.last_activity == iso_ms(h.last_activity_ms)
    assert h.watermark == iso_ms(latest.batch_watermark_ms) and h.watermark is not None
    assert h.latest_planned == iso_ms(latest.batch_timestamp_ms)

    first = run_cli("versions", str(root)).stdout.splitlines()[0]
    assert first.startswith("last activity 2026-11-18 ")
    assert "last committed 19 · restartable: yes" in first
    assert "watermark 2024-01-01 00:35:30" in first


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


def test_damaged_state_bytes_are_left_to_validate(tmp_path: Path) -> None:
    # The headline plans the restart without decoding state files: a truncated delta is
    # validate's to find (the JSON says the files were not decoded).
    root = copy_checkpoint(tmp_path)
    delta = root / "state" / "0" / "0" / "10.delta"
    delta.write_bytes(delta.read_bytes()[:-10])
    h = headline(ckpt_cli.open(str(root)))
    assert h.restartable and h.decoded is False
    assert not ckpt_cli.open(str(root)).validate().ok
