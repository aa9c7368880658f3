"""ZIP_METADATA_V2 says which Spark versions restart a Spark 4.0 format-v2 checkpoint.

``fixtures/v2upgrade/`` holds real Spark 4.0.5 checkpoints of several shapes and what Spark
4.0.5, 4.1.4, 4.2.1 and 4.3.0 did restarting a copy of each (``fixtures/probe_v2_upgrade.py``,
``results.json``). ckpt's verdict must be what those Sparks did. The scripted variants below
change one thing in a real checkpoint and follow Spark's code (``ckpt_cli.validate.upgrade``);
``tests/test_v2_upgrade_spark.py`` restarts some of them on Spark 4.3.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, run_cli
from tests.test_unsupported_versions import zip_with_header

V2UPGRADE = REPO / "fixtures" / "v2upgrade"
RESULTS: dict[str, Any] = (
    json.loads((V2UPGRADE / "results.json").read_text())["shapes"]
    if (V2UPGRADE / "results.json").is_file()
    else {}
)
WRITTEN = [name for name, shape in RESULTS.items() if "write_error" not in shape]


def findings(root: Path, *args: str) -> list[dict[str, Any]]:
    result = run_cli("validate", str(root), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return found


def copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(V2UPGRADE / name / "checkpoint", dest)
    return dest


def spark_restarted(name: str, version: str) -> bool:
    ok: bool = RESULTS[name]["restarts"][version]["restart"]["ok"]
    return ok


def zips(root: Path, version: int) -> list[Path]:
    return sorted(root.glob(f"state/0/*/{version}_*.zip"))


def newest_zip(part: Path, version: int) -> Path:
    return max(
        (p for p in part.glob("*_*.zip") if int(p.name.split("_")[0]) <= version),
        key=lambda p: int(p.name.split("_")[0]),
    )


def test_every_shape_was_written_and_restarted() -> None:
    """The probe's results are whole: a shape per case of the rule, each restarted by every
    Spark, the control (4.0.5, the writer) always, and the same rows wherever it restarted."""
    assert set(WRITTEN) >= {
        "zip-short",
        "zip-full",
        "changelog-short",
        "changelog-full",
        "changelogs-only",
        "no-changelog",
    }
    for name in WRITTEN:
        restarts = RESULTS[name]["restarts"]
        assert set(restarts) == {"4.0", "4.1", "4.2", "4.3"}, name
        assert restarts["4.0"]["restart"]["ok"], name
        assert restarts["4.0"]["second_restart"]["ok"], name
        for version in ("4.1", "4.2", "4.3"):
            run = restarts[version]["restart"]
            if run["ok"]:
                assert run["emitted_as_control"], (name, version)
                assert restarts[version]["second_restart"]["emitted_as_control"], (name, version)
            else:
                assert any(c.startswith("CANNOT_LOAD_STATE_STORE") for c in run["error_classes"])


@pytest.mark.parametrize("name", WRITTEN)
def test_verdict_is_what_spark_did(name: str) -> None:
    """Per shape: the finding's verdict for 4.1 and for 4.2+ is the real restarts' outcome;
    a WARNING exactly where an upgrade fails, never "keep it on 4.0" where one works."""
    ok41 = spark_restarted(name, "4.1")
    ok42 = spark_restarted(name, "4.2")
    assert ok42 == spark_restarted(name, "4.3"), "4.2.1 and 4.3.0 load alike"
    found = [f for f in findings(V2UPGRADE / name / "checkpoint") if f["code"] == "ZIP_METADATA_V2"]
    if ok41 and ok42:
        assert all(f["severity"] == "info" for f in found), found
        assert all(f["upgrade"] == {"4.1": "restarts", "4.2+": "restarts"} for f in found)
        return
    (finding,) = found
    assert finding["severity"] == "warning"
    verdict = {"4.1": "restarts" if ok41 else "fails", "4.2+": "restarts" if ok42 else "fails"}
    assert finding["upgrade"] == verdict
    assert finding["restart_version"] == RESULTS[name]["restart_version"]
    # The zips a restart loads: each partition's newest (none of these shapes restarted
    # midway, so each lineage runs unbroken through them).
    root = V2UPGRADE / name / "checkpoint"
    assert finding["paths"] == [
        str(newest_zip(part, RESULTS[name]["restart_version"]).relative_to(root))
        for part in sorted(root.glob("state/0/[0-9]*"))
    ]
    if ok42:
        assert "Spark 4.2 or later, not 4.1" in finding["hint"]
        assert "4.0 restarts it as it is" in finding["hint"]
    else:
        assert "ckpt convert CKPT --format-version 2" in finding["hint"]
        assert "auto snapshot repair" in finding["message"]


def test_restart_version_zip_is_the_loaded_one() -> None:
    """zip-short: the restart version's own zip is what Spark loads (its log: "Loaded
    latestSnapshotVersion: 6"), and the message says why 4.2+ cannot rebuild it."""
    log = RESULTS["zip-short"]["restarts"]["4.3"]["restart"]["log"]
    assert any("Failed to load snapshot version 6" in line for line in log)
    (finding,) = [
        f
        for f in findings(V2UPGRADE / "zip-short" / "checkpoint")
        if f["code"] == "ZIP_METADATA_V2"
    ]
    assert finding["paths"] == [
        str(p.relative_to(V2UPGRADE / "zip-short" / "checkpoint"))
        for p in zips(V2UPGRADE / "zip-short" / "checkpoint", 6)
    ]
    assert "changelogs 1-6, and they go back only to version 4" in finding["message"]


def test_no_changelog_has_no_repair() -> None:
    (finding,) = [
        f
        for f in findings(V2UPGRADE / "no-changelog" / "checkpoint")
        if f["code"] == "ZIP_METADATA_V2"
    ]
    assert "without changelog checkpointing" in finding["message"]


def test_missing_changelog_on_the_way_back_fails_the_repair(tmp_path: Path) -> None:
    """zip-full without changelog 3 of one partition: Spark 4.2+ would walk the lineage back
    (it reads the lineage lines of 6, 4 and 2 only) and fail replaying version 3."""
    root = copy("zip-full", tmp_path)
    (gone,) = root.glob("state/0/1/3_*.changelog")
    gone.unlink()
    for crc in root.glob(f"state/0/1/.{gone.name}.crc"):
        crc.unlink()
    (finding,) = [f for f in findings(root) if f["code"] == "ZIP_METADATA_V2"]
    assert finding["severity"] == "warning"
    assert finding["upgrade"] == {"4.1": "fails", "4.2+": "fails"}
    assert "state/0/1" in finding["message"] and gone.name in finding["message"]


def test_older_v1_zip_is_a_repair_base(tmp_path: Path) -> None:
    """zip-full with version 4's zips given v1 metadata (what a conversion would write):
    4.2+'s repair loads them before trying the empty store."""
    root = copy("zip-full", tmp_path)
    for path in zips(root, 4):
        zip_with_header(path, "v1")
    (finding,) = [f for f in findings(root) if f["code"] == "ZIP_METADATA_V2"]
    assert finding["upgrade"] == {"4.1": "fails", "4.2+": "restarts"}
    assert "the v1 zip of version 4 and changelogs 5-6" in finding["message"]
    assert "changelogs 5-6 are retained" in finding["hint"]


def test_v2_zips_a_restart_does_not_load_are_info(tmp_path: Path) -> None:
    """zip-full with the restart version's zips given v1 metadata: a restart loads no v2
    zip, so nothing is said at the restart; validating every version names the others as
    information."""
    root = copy("zip-full", tmp_path)
    for path in zips(root, 6):
        zip_with_header(path, "v1")
    assert not [f for f in findings(root) if f["code"] == "ZIP_METADATA_V2"]
    (finding,) = [f for f in findings(root, "--all-versions") if f["code"] == "ZIP_METADATA_V2"]
    assert finding["severity"] == "info"
    assert finding["upgrade"] == {"4.1": "restarts", "4.2+": "restarts"}
    assert sorted(finding["paths"]) == sorted(
        str(p.relative_to(root)) for v in (2, 4) for p in zips(root, v)
    )
    assert "loads none of them" in finding["message"]
    assert "keep" not in finding["hint"].lower()
