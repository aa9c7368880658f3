"""One verdict per checkpoint: the headline of ``versions``, the HTML report, ``validate``'s
default scope and ``repair``'s plan say the same thing about a restart, on copies of real
fixtures damaged the ways operators meet (an SST a restart zip names is gone, the restart
zip is cut short, an older changelog's lineage is broken), and every scope says what it
judged."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import latest, remove_restart_sst, truncate_restart_zip
from tests.lineage_damage import rewrite_lineage
from tests.test_lineage import break_latest_lineage

ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"
HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
V2 = CASES_DIR / "spark4-rocksdb-v2" / "checkpoint"


def _copy(src: Path, tmp_path: Path) -> Path:
    root = tmp_path / "checkpoint"
    shutil.copytree(src, root)
    return root


def _verdicts(root: Path, tmp_path: Path) -> dict[str, Any]:
    """What each command says about a restart of ``root``."""
    validate = run_cli("validate", str(root), "--json")
    versions = run_cli("versions", str(root), "--json")
    text = run_cli("versions", str(root)).stdout.split("\n\n")[0]
    report = run_cli("report", str(root), "-o", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    repair = run_cli("repair", str(root), "--json")
    return {
        "validate": validate.json(),
        "validate_exit": validate.exit_code,
        "headline": versions.json()["headline"],
        "headline_text": text,
        "report_text": report.stdout,
        "report_page": page,
        "repair": repair.json(),
        "repair_exit": repair.exit_code,
    }


DAMAGE: dict[str, Callable[[Path], Path]] = {
    "missing-sst": remove_restart_sst,
    "truncated-zip": truncate_restart_zip,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_restart_zip_that_cannot_load_is_no_everywhere(damage: str, tmp_path: Path) -> None:
    root = _copy(ROCKS, tmp_path)
    hurt = DAMAGE[damage](root)
    rel = hurt.relative_to(root).as_posix()
    v = _verdicts(root, tmp_path)
    errors = [f for f in v["validate"]["findings"] if f["severity"] == "error"]
    assert v["validate_exit"] == 1 and not v["validate"]["ok"]
    assert any(rel in f["paths"] for f in errors), errors
    # The headline: no, for validate's reasons, naming the file.
    h = v["headline"]
    assert h["restartable"] is False and h["decoded"] is True
    assert h["codes"] == sorted({f["code"] for f in errors})
    assert "restartable: no, because" in v["headline_text"] and rel in v["headline_text"]
    # The report: the same "no" above the same findings.
    assert "restartable: no" in v["report_text"]
    assert '<span class="error">no</span>' in v["report_page"]
    assert '<span class="ok">yes</span>' not in v["report_page"]
    # Repair: a plan for it (a rollback to a batch whose state loads), nothing left over.
    plan = v["repair"]
    assert plan["actions"] and v["repair_exit"] == 1
    assert plan["rollback_to"] is not None and plan["rollback_to"] < h["latest_committed"]
    assert not [f for f in plan["left"] if f["restart"]]


def test_an_older_broken_lineage_is_explained_by_every_scope(tmp_path: Path) -> None:
    # A format-v2 changelog hidden from a restart by the zip of its version has a broken
    # lineage: a restart works (Spark loads the zip), a replay of the version before fails.
    root = _copy(V2, tmp_path)
    changelog, _, _ = break_latest_lineage(root)
    rel = changelog.relative_to(root).as_posix()
    v = _verdicts(root, tmp_path)
    assert v["validate"]["ok"] and v["headline"]["restartable"] is True
    deep = run_cli("validate", str(root), "--deep")
    assert deep.exit_code == 1
    # Each scope says what it judged, and the deep one that a restart does not need it.
    assert "every retained version, every file decoded (deep)" in deep.stdout
    assert "without --all-versions/--deep" in deep.stdout
    assert "restart from batch" in run_cli("validate", str(root)).stdout
    # Repair: nothing to do for a restart, and it says what it leaves and why.
    plan = v["repair"]
    assert v["repair_exit"] == 0 and plan["actions"] == []
    left = [f for f in plan["left"] if rel in f["paths"]]
    assert left and left[0]["code"] == "LINEAGE_MISMATCH" and left[0]["restart"] is False
    assert "not needed by a restart from batch" in left[0]["why"]
    assert "--rollback-to" in left[0]["why"]
    text = run_cli("repair", str(root)).stdout
    assert "Judged" in text and "Left as they are" in text and "LINEAGE_MISMATCH" in text
    assert "Nothing to repair" in text


def test_every_finding_repair_cures_says_so_in_its_hint() -> None:
    from ckpt_cli.repair.plan import _ROLLBACK_CODES
    from ckpt_cli.validate.codes import CODES, INFO

    for code in sorted(_ROLLBACK_CODES):
        severity, hint = CODES[code]
        if severity == INFO:
            continue  # nothing to do (an uncommitted batch Spark re-runs)
        assert "ckpt repair" in hint, code


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_replay_error_says_what_fixes_it(damage: str, tmp_path: Path) -> None:
    root = _copy(ROCKS, tmp_path)
    DAMAGE[damage](root)
    result = run_cli("replay", str(root), "-f", "jsonl", "--json")
    assert result.exit_code == 2
    error = result.json()["errors"][0]
    assert error["hint"] and "ckpt repair" in error["hint"] and "--best-effort" in error["hint"]
    text = run_cli("replay", str(root), "-f", "jsonl")
    assert "hint: " in text.stderr and "ckpt repair" in text.stderr


def _best_effort(root: Path) -> tuple[list[dict[str, Any]], str]:
    result = run_cli("replay", str(root), "-f", "jsonl", "--best-effort")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line], result.stderr


def _rows_at(root: Path, batch: int, partition: int) -> list[dict[str, Any]]:
    result = run_cli(
        "replay", str(root), "-f", "jsonl", "--batch", str(batch), "-p", str(partition)
    )
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line]


def _truncate_latest_delta(root: Path) -> Path:
    delta = root / "state/0/0" / f"{latest(root) + 1}.delta"
    delta.write_bytes(delta.read_bytes()[:-10])
    return delta


def _remove_latest_delta(root: Path) -> Path:
    delta = root / "state/0/0" / f"{latest(root) + 1}.delta"
    delta.unlink()
    (delta.parent / f".{delta.name}.crc").unlink(missing_ok=True)
    return delta


def _break_restart_lineage(root: Path) -> Path:
    # The restart version of partition 0 is only a changelog whose lineage names an id no
    # file has for the version before: Spark cannot load it.
    from tests.test_lineage import commit_ids

    top = latest(root) + 1
    uid = commit_ids(root, top - 1)[0][0]
    (root / f"state/0/0/{top}_{uid}.zip").unlink()
    for crc in (root / "state/0/0").glob(f"*{top}_{uid}.zip.crc"):
        crc.unlink()
    changelog = root / f"state/0/0/{top}_{uid}.changelog"
    rewrite_lineage(changelog, top - 1)
    return changelog


BEST_EFFORT = {
    "missing-sst": (ROCKS, remove_restart_sst),
    "truncated-zip": (ROCKS, truncate_restart_zip),
    "truncated-delta": (HDFS, _truncate_latest_delta),
    "missing-delta": (HDFS, _remove_latest_delta),
    "broken-lineage": (V2, _break_restart_lineage),
}


@pytest.mark.parametrize("damage", list(BEST_EFFORT))
def test_best_effort_replays_the_newest_version_that_loads(damage: str, tmp_path: Path) -> None:
    src, hurt = BEST_EFFORT[damage]
    root = _copy(src, tmp_path)
    top = latest(root)
    hurt(root)
    assert run_cli("replay", str(root), "-f", "jsonl").exit_code == 2
    rows, stderr = _best_effort(root)
    # Partition 0 falls back, and stderr says to which version; the others are as they were.
    assert f"partition 0: version {top + 1} does not load" in " ".join(stderr.split())
    assert "replayed version" in stderr and "partition 1:" not in stderr
    p0 = sorted((r for r in rows if r["partition_id"] == 0), key=json.dumps)
    p1 = sorted((r for r in rows if r["partition_id"] == 1), key=json.dumps)
    assert p1 == sorted(_rows_at(root, top, 1), key=json.dumps)
    fell_to = int(" ".join(stderr.split()).split("replayed version ")[1].split()[0])
    assert fell_to <= top
    assert p0 == sorted(_rows_at(root, fell_to - 1, 0), key=json.dumps)
